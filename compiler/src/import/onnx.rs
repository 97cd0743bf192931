//! ONNX to `hl`: a forward-only ONNX model becomes an `hl` module whose
//! `@forward` is the graph and whose `@loss` (cross-entropy or MSE, chosen
//! by the user) lets AICF's own `hl-autodiff` and `hl-optimizer` build the
//! train step.
//!
//! The graph is traced through the layer API ([`crate::nn`]): each node
//! becomes `hl` ops whose result types the ops infer themselves, so the
//! importer has no shape rules of its own beyond what ONNX's attributes
//! mean. Values known at import time (initializers used as shapes,
//! `Constant`, and the shape arithmetic exports emit around reshapes:
//! `Shape`, `Gather`, `Concat`, `Unsqueeze`, `ConstantOfShape`, `Range`,
//! ...) are folded here and never reach the IR. Float initializers that a
//! node uses as a weight (Conv, Gemm, MatMul, normalisation scales and
//! biases, an embedding table, the operand of a bias add) become
//! `hl.param`s with `init <data>`: their values go to a safetensors file
//! beside the IR ([`crate::weights`]). Every other initializer is a
//! constant.
//!
//! A node that is not supported, or a dimension that cannot be made
//! static, is one [`ImportError`] naming the node, its op type and the
//! opset, never a panic.

use crate::nn::{
    self, Compare, Conv2dOptions, DType, GeluApproximation, Graph, Mode, ModuleBuilder, Pool2dOptions, Reduction,
    Tensor, TensorSpec,
};
use aicf_onnx::proto::{self, AttributeProto, NodeProto, attribute_proto::AttributeType, tensor_proto::DataType};
use aicf_runtime::init::Init;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};

/// The ONNX op types the importer translates (default domain).
pub const SUPPORTED: &[&str] = &[
    "Abs",
    "Add",
    "And",
    "ArgMax",
    "Atan",
    "Attention",
    "AveragePool",
    "BatchNormalization",
    "Bernoulli",
    "Cast",
    "CastLike",
    "Ceil",
    "Celu",
    "Clip",
    "Concat",
    "ConcatFromSequence",
    "Constant",
    "ConstantOfShape",
    "Conv",
    "ConvTranspose",
    "Cos",
    "DepthToSpace",
    "Cosh",
    "CumSum",
    "Div",
    "Dropout",
    "Einsum",
    "Elu",
    "Equal",
    "Erf",
    "Exp",
    "Expand",
    "EyeLike",
    "Flatten",
    "Floor",
    "Gather",
    "GatherElements",
    "GatherND",
    "Gelu",
    "Gemm",
    "GlobalAveragePool",
    "GlobalMaxPool",
    "Greater",
    "GreaterOrEqual",
    "GroupNormalization",
    "GRU",
    "HardSigmoid",
    "HardSwish",
    "Identity",
    "If",
    "InstanceNormalization",
    "IsInf",
    "IsNaN",
    "LayerNormalization",
    "LeakyRelu",
    "Less",
    "LessOrEqual",
    "Log",
    "LogSoftmax",
    "LSTM",
    "Loop",
    "MatMul",
    "Max",
    "MaxPool",
    "Min",
    "Mish",
    "Mod",
    "Mul",
    "Neg",
    "NegativeLogLikelihoodLoss",
    "Not",
    "OneHot",
    "Or",
    "Pad",
    "Pow",
    "PRelu",
    "RandomNormal",
    "RandomNormalLike",
    "RandomUniform",
    "RandomUniformLike",
    "Range",
    "Reciprocal",
    "ReduceL1",
    "ReduceL2",
    "ReduceLogSumExp",
    "ReduceMax",
    "ReduceMean",
    "ReduceMin",
    "ReduceProd",
    "ReduceSum",
    "ReduceSumSquare",
    "Relu",
    "Reshape",
    "Resize",
    "ReverseSequence",
    "RMSNormalization",
    "RNN",
    "RotaryEmbedding",
    "Round",
    "ScatterElements",
    "ScatterND",
    "Selu",
    "Shape",
    "Sigmoid",
    "Sign",
    "Sin",
    "Sinh",
    "Slice",
    "Softmax",
    "SoftmaxCrossEntropyLoss",
    "Softplus",
    "Softsign",
    "SpaceToDepth",
    "Split",
    "Sqrt",
    "Squeeze",
    "SequenceAt",
    "SequenceLength",
    "SplitToSequence",
    "Sub",
    "Swish",
    "Tan",
    "Tanh",
    "Tile",
    "TopK",
    "Transpose",
    "Trilu",
    "Unsqueeze",
    "Where",
    "Xor",
];

/// The opsets the importer reads (the default domain's version; 28 is
/// the newest of onnx 1.23).
pub const OPSETS: std::ops::RangeInclusive<i64> = 7..=28;

/// The loss `@loss` computes: of the model's first output, or the graph's
/// own.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Loss {
    /// Mean cross-entropy of logits `[..., C]` against integer labels `[...]`.
    CrossEntropy,
    /// Mean squared error against a target of the output's shape.
    Mse,
    /// The loss the graph computes itself: its output of that name, or
    /// (`None`) its one scalar float output (a module's `forward(x,
    /// targets)` returning `(logits, loss)`, as nanoGPT's does). `@loss`
    /// returns it, taking the inputs `@forward` needs and then the others
    /// (the targets); `@forward` returns the other outputs.
    Graph(Option<String>),
    /// The graph's own loss where it declares one scalar float output (as
    /// [`Loss::Graph`]), else [`Loss::CrossEntropy`]: what `aicf train`
    /// does without `--loss`.
    Auto,
    /// No `@loss`: the module only has `@forward` (inference).
    None,
}

impl Loss {
    pub fn parse(text: &str) -> Result<Loss, String> {
        match text {
            "cross_entropy" | "cross-entropy" | "ce" => Ok(Loss::CrossEntropy),
            "mse" => Ok(Loss::Mse),
            "graph" => Ok(Loss::Graph(None)),
            "auto" => Ok(Loss::Auto),
            "none" => Ok(Loss::None),
            other => match other.strip_prefix("graph:") {
                Some(name) if !name.is_empty() => Ok(Loss::Graph(Some(name.to_string()))),
                _ => Err(format!(
                    "unknown loss '{other}': expected cross_entropy, mse, graph (the graph's own scalar output), \
                     graph:OUTPUT, auto or none"
                )),
            },
        }
    }

    /// The name `--loss` takes.
    pub fn name(&self) -> String {
        match self {
            Loss::CrossEntropy => "cross_entropy".into(),
            Loss::Mse => "mse".into(),
            Loss::Graph(None) => "graph".into(),
            Loss::Graph(Some(o)) => format!("graph:{o}"),
            Loss::Auto => "auto".into(),
            Loss::None => "none".into(),
        }
    }
}

#[derive(Debug, Clone)]
pub struct ImportOptions {
    /// The size a symbolic (or unknown) leading dimension is bound to.
    pub batch: Option<usize>,
    pub loss: Loss,
    /// Initializers to import as constants, not trained, whatever their
    /// use (`aicf import --freeze`): exact names, or prefixes ending in
    /// `*`. A TorchScript export keeps no record of which tensors are
    /// buffers (a positional-encoding table added to activations would
    /// train); a name that matches no initializer is an error.
    pub freeze: Vec<String>,
    /// Float initializers to train whatever their use (`--trainable`):
    /// exact names, or prefixes ending in `*`. A learned value no op reads
    /// as a weight (an LSTM's initial state `h0`, an `nn.Parameter` spread
    /// to the batch) imports as a constant otherwise; a name that matches
    /// no float initializer is an error.
    pub trainable: Vec<String>,
    /// Parameter names as imports before 2026-12-07 made them: a leading
    /// digit got a `p` (`p0.weight` for `nn.Sequential`'s `0.weight`), so a
    /// checkpoint trained then is of this import's model.
    pub legacy_names: bool,
    /// The label the cross-entropy AICF adds counts for nothing (PyTorch's
    /// `ignore_index`: Hugging Face pads labels with -100); `None`, every
    /// label counts. Refused with another loss.
    pub ignore_index: Option<i64>,
}

impl Default for ImportOptions {
    fn default() -> Self {
        ImportOptions {
            batch: None,
            loss: Loss::Auto,
            freeze: Vec::new(),
            trainable: Vec::new(),
            legacy_names: false,
            ignore_index: None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ImportError {
    #[error(transparent)]
    Onnx(#[from] aicf_onnx::OnnxError),
    /// A node the importer cannot translate (or whose inputs it refuses).
    #[error("{model}: node '{node}'{within} ({op}, opset {opset}): {message}")]
    Node {
        model: String,
        node: String,
        /// ` in module '<path>'` where the exporter's metadata names the
        /// node's module (dynamo's node names are generic), else empty.
        within: String,
        op: String,
        opset: i64,
        message: String,
    },
    /// Something about the model as a whole (its opset, inputs, outputs).
    #[error("{model}: {message}")]
    Model { model: String, message: String },
}

/// An imported model: the `hl` module and the values of its
/// `init <data>` parameters.
#[derive(Debug, Clone)]
pub struct Imported {
    pub module: nn::HlModule,
    /// Parameter name, shape and values, in declaration order.
    pub weights: Vec<(String, Vec<usize>, Vec<f32>)>,
    /// Each parameter's ONNX initializer name, in declaration order.
    pub sources: Vec<String>,
    /// The initializers (of `sources`) whose parameter holds them
    /// transposed: a linear layer's weight the exporter stored `[in, out]`
    /// (`onnx::MatMul_N`), imported `[out, in]` as `hl.linear` reads it.
    pub transposed: Vec<String>,
    /// The parameters (by name, a checkpoint's key) held transposed under
    /// their initializer's own name: a Gemm's weight stored `[in, out]`
    /// (Hugging Face's `Conv1D`, jax2onnx's Dense kernel), a MatMul's the
    /// export names by no module. A checkpoint holds them `[out, in]`, the
    /// framework's module `[in, out]`.
    pub transposed_in_place: Vec<String>,
    /// The default domain's opset the model declares.
    pub opset: i64,
    /// Float types other than f32 the graph declares (`float64`,
    /// `float16`, `bfloat16`: a JAX model exported with x64 enabled, or in
    /// bf16), which AICF imports and computes in f32 (`--precision`
    /// chooses a mixed precision for the train step).
    pub other_floats: Vec<String>,
    /// Dropout nodes the export marks for inference (`training_mode` false
    /// or absent), which AICF applies while training all the same (the
    /// model's framework does in training) and never in `@forward`.
    pub inference_dropouts: Vec<String>,
    /// Random nodes (Dropout, RandomNormal, Bernoulli, ...) whose `seed`
    /// attribute the export fixes, which AICF does not follow: their draws
    /// follow the run's seed (`aicf train --seed`).
    pub seeded_random: Vec<String>,
    /// The program that wrote the model (`producer_name`: `pytorch`,
    /// `tf2onnx`, `jax2onnx`, ...), empty where it says none.
    pub producer: String,
    /// The graph's inputs as `@forward` takes them (with the graph's own loss,
    /// as `@loss` takes them: `@forward`'s, then the targets).
    pub inputs: Vec<(String, TensorSpec)>,
    /// Whether an input had a symbolic (or unknown) dimension for
    /// `--batch` to bind.
    pub symbolic: bool,
    /// An export at a static batch of 1 (PyTorch's `torch.randn(1, ...)`
    /// with no dynamic axis) given `--batch N`: `Ok(())` where its inputs'
    /// leading 1 was read as the batch, bound to N; `Err(why)` where the
    /// graph's own ops fix the batch at 1 (it imports at 1). `None`
    /// otherwise.
    pub batch_of_one: Option<Result<(), String>>,
    /// Float initializers of more than one value that import as constants
    /// (no op uses them as a weight): not trained. (ONNX marks no tensor
    /// trainable; the importer decides by use.)
    pub frozen: Vec<(String, usize)>,
    /// Float initializers the dynamo exporter's metadata names a module's
    /// buffer (`register_buffer`) or a value it computed and folded (a RoPE
    /// table): constants of the export, not trained (their use alone made
    /// them parameters).
    pub exported_constants: Vec<(String, usize)>,
    /// Trained initializers the dynamo exporter computed from parameters
    /// and folded (a normalized weight), with the ops it folded: each
    /// trains as a tensor of its own, not through that computation (as
    /// PyTorch's parameter would); `optimize=False` keeps the computation.
    pub computed_folds: Vec<(String, Vec<String>)>,
    /// Initializers the dynamo exporter computed from parameters and
    /// folded (a weight penalty's `W.pow(2).sum()`), with the ops it folded,
    /// that import as constants: no gradient reaches those parameters
    /// through them (`optimize=False` keeps the computation).
    pub constant_folds: Vec<(String, Vec<String>)>,
    /// One-value initializers of a TorchScript export that train (a
    /// learned scale: the export records a parameter as it records a
    /// buffer).
    pub scalar_params: Vec<String>,
    /// Initializers of more than one value of a TorchScript export, under
    /// the model's own names, that train only because the graph adds,
    /// subtracts, multiplies or concatenates them with activations, or
    /// gathers from them as a table of one axis: a learned bias, scale or
    /// position table, or a buffer (a normalisation's mean, a loss's
    /// quantiles, a diffusion schedule), which that export records alike
    /// (`--freeze` keeps a buffer constant).
    pub arithmetic_params: Vec<String>,
    /// Trained initializers of a TorchScript export under names the
    /// exporter made (`onnx::<Op>_<n>`: a value it computed and folded,
    /// or a parameter it reshaped), other than a linear layer's weight it
    /// stored transposed.
    pub exporter_named: Vec<String>,
    /// Float initializers `--freeze` named (`ImportOptions::freeze`):
    /// constants, not trained.
    pub frozen_by_option: Vec<(String, usize)>,
    /// Parameters the dynamo exporter folded into their copies over the
    /// batch (`cls.repeat(B, 1, 1)` at a static batch: an initializer of B
    /// equal slices named by that op), imported as the one slice
    /// broadcast (name, copies): as copies they trained apart.
    pub broadcast: Vec<(String, usize)>,
    /// Float initializers holding an infinity or a magnitude of 1e30 or
    /// more (an attention mask kept as a PyTorch buffer, added to the
    /// scores): constants, never trained, wherever they are used.
    pub masks: Vec<(String, usize)>,
    /// Parameters that are the scale or shift of more than one
    /// normalization (initializer, how many): trained as one. PyTorch's
    /// dynamo exporter reads one initializer wherever the values are
    /// equal, so a fresh model's norms come out tied.
    pub shared_norms: Vec<(String, usize)>,
    /// Weights and biases read by more than one layer (initializer, how
    /// many): trained as one. The dynamo exporter merges equal
    /// initializers, so a fresh stack of copied layers
    /// (`nn.TransformerEncoder`) comes out as one layer's weights.
    pub shared_weights: Vec<(String, usize)>,
    /// `(initializer, weight)`: an output layer's weight the exporter wrote
    /// as the exact transpose of another (an embedding table tied to it),
    /// read as that weight, tied as in the model.
    pub tied: Vec<(String, String)>,
    /// `(parameter, initializer)`: parameters the dynamo exporter had
    /// merged into one initializer of equal values (its metadata names the
    /// parameter each node read), imported apart, each from those values.
    pub untied: Vec<(String, String)>,
    /// Linear layers' biases the dynamo exporter dropped (zero when
    /// exported; its metadata names them), imported as zero parameters.
    pub restored: Vec<String>,
    /// `(export's name, embedding's name)`: an embedding table the dynamo
    /// exporter named by the output layer tied to it (`lm_head.weight`),
    /// imported under the embedding's (`transformer.wte.weight`), as
    /// `named_parameters()` and Hugging Face's checkpoints name it.
    pub renamed_tables: Vec<(String, String)>,
    /// `(copy, initializer)`: values tf2onnx merged (a fresh Keras model's
    /// norms' ones and zeros, read by layers of several scopes), imported
    /// apart, one per layer.
    pub untied_tf2onnx: Vec<(String, String)>,
    /// `(table, padding_idx)`: embeddings a dynamo export's metadata says
    /// PyTorch declared with a padding index (`aten.embedding(w, x, p)`),
    /// whose row PyTorch never updates. ONNX's Gather cannot say so: that
    /// row trains here (a note says so).
    pub padding_rows: Vec<(String, i64)>,
    /// Batch norms the dynamo exporter's optimizer folded into the layer
    /// before them (`FuseBatchNormIntoConv`, `...IntoGemm`,
    /// `...IntoConvTranspose`): (the norm's module, whether PyTorch ran it
    /// in training mode). They train as part of that layer's weights; one
    /// in training mode normalized by the batch's statistics, which the
    /// folded graph does not do at all.
    pub folded_norms: Vec<(String, bool)>,
    /// The nodes that draw noise (op type, first output): RandomNormal(Like),
    /// RandomUniform(Like) and Bernoulli. Each draws afresh every step in
    /// `@loss` from the run's seed (not its own `seed` attribute); in
    /// `@forward`, its mean.
    pub noise: Vec<(String, String)>,
    /// Inputs a text does not give, filled by the trainer (`hl.fill` on
    /// their arguments): a Hugging Face model's `attention_mask` (1: a
    /// text's windows are whole) and `token_type_ids` (0).
    pub fills: Vec<(String, f64)>,
    /// Whether a node of `noise` sets its own `seed` (not taken: the run's
    /// seed draws the numbers).
    pub noise_seeded: bool,
    /// Each decision the import took on what it knew: an If (by name, or
    /// `#<index>`) and its branch ("then", "else"), a Loop and its
    /// iterations ("8 iterations").
    pub branches: Vec<(String, String)>,
    /// The graph's own loss, where `@loss` returns it ([`Loss::Graph`]).
    pub graph_loss: Option<GraphLoss>,
    /// Graph inputs no node reads (fed, and ignored): a dynamo export of a
    /// tensor passed twice reads one input for both.
    pub unread_inputs: Vec<String>,
    /// Whether PyTorch's dynamo exporter wrote the model (its nodes carry
    /// `pkg.torch.onnx` metadata): it merges equal initializers, so a
    /// shared one may be its doing, not the model's.
    pub dynamo: bool,
    /// Whether that export lost its records of which values are parameters
    /// (its nodes' FX and module metadata, the inputs' kinds: the exporter
    /// builds at opset 18 and converting it down drops them), so the
    /// importer guessed from names and uses.
    pub dynamo_records_lost: bool,
    /// The first output's node where it is a `Softmax` and the loss a
    /// cross-entropy, which takes logits: `@loss` takes the Softmax's
    /// input (on the probabilities, the loss stalled where PyTorch's on
    /// the logits learns).
    pub softmax_output: Option<String>,
    /// The first output's node where it is a `Softmax` over another axis
    /// than the last (the class axis a cross-entropy reads): it trains on
    /// the probabilities taken as logits, and learns little.
    pub softmax_output_other_axis: Option<String>,
    /// What tf2onnx's optimizer folded away of a Keras model, where it
    /// wrote the model: its layers that read no bias (a bias of zeros,
    /// a fresh model's, is dropped), and its convolutions a batch norm was
    /// folded into (an inference-mode export).
    pub tf2onnx_folds: Option<Tf2OnnxFolds>,
}

/// See [`Imported::tf2onnx_folds`].
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Tf2OnnxFolds {
    /// MatMul, Gemm and Conv nodes (by name) whose output no Add of an
    /// initializer reads and that take no bias input.
    pub biasless: Vec<String>,
    /// Conv and MatMul nodes named as a batch norm's (`.../batchnorm/...`):
    /// a norm folded into the layer's weight.
    pub norms_folded: Vec<String>,
    /// Mul nodes by a scale of ones (a fresh norm's gamma) whose output no
    /// Add of an initializer reads: a norm whose beta of zeros was dropped.
    pub betaless: Vec<String>,
}

/// A node as a message names it: its name, or its first output's.
fn node_label(n: &proto::NodeProto) -> String {
    if n.name().is_empty() { n.output.first().cloned().unwrap_or_default() } else { n.name().to_string() }
}

/// [`Tf2OnnxFolds`] of a tf2onnx export's `graph` (`None` where nothing was
/// folded away).
fn tf2onnx_folds(graph: &proto::GraphProto, inits: &HashMap<String, aicf_onnx::Tensor>) -> Option<Tf2OnnxFolds> {
    let mut folds = Tf2OnnxFolds::default();
    let biased = |out: &String| {
        graph.node.iter().any(|r| {
            r.op_type() == "Add" && r.input.iter().any(|i| i == out) && r.input.iter().any(|i| inits.contains_key(i))
        })
    };
    for n in graph.node.iter().filter(|n| n.op_type() == "Mul") {
        let ones = n.input.iter().filter_map(|i| inits.get(i)).any(|t| {
            let values = t.data.to_f64();
            t.is_float() && values.len() >= 2 && values.iter().all(|&v| v == 1.0)
        });
        // (A shift in the norm's scope: an Add or Sub of an initializer of
        // two values or more, tf2onnx's `beta - mean * scale` or `+ beta`.)
        if !ones {
            continue;
        }
        let scope = n.name().rsplit_once('/').map(|(s, _)| format!("{s}/"));
        let shifted = scope.is_some_and(|scope| {
            graph.node.iter().any(|r| {
                matches!(r.op_type(), "Add" | "Sub")
                    && r.name().starts_with(&scope)
                    && r.input.iter().filter_map(|i| inits.get(i)).any(|t| t.elements() >= 2)
            })
        });
        if !shifted && n.output.first().is_some_and(|o| !biased(o)) {
            folds.betaless.push(node_label(n));
        }
    }
    // What a loop reads (tf2onnx hoists a Keras GRU's input projection out
    // of its while loop and adds the bias in the body): a bias is not
    // looked for there, so nothing is said of a layer read so.
    let looped: HashSet<&str> = graph
        .node
        .iter()
        .filter(|n| n.op_type() == "Loop")
        .flat_map(|n| n.input.iter().map(String::as_str).chain(subgraph_reads(n)))
        .collect();
    for n in &graph.node {
        let layer = matches!(n.op_type(), "MatMul" | "Gemm" | "Conv" | "ConvTranspose");
        if n.output.first().is_some_and(|o| looped.contains(o.as_str())) {
            continue;
        }
        // (A weight of the model's: an initializer, of two axes or more.)
        if !layer || !n.input.get(1).and_then(|w| inits.get(w)).is_some_and(|t| t.dims.len() >= 2) {
            continue;
        }
        let name = node_label(n);
        if name.contains("/batchnorm/") {
            folds.norms_folded.push(name);
            continue;
        }
        let has_bias = n.input.get(2).is_some_and(|b| !b.is_empty());
        if !has_bias && !n.output.first().is_some_and(biased) {
            folds.biasless.push(name);
        }
    }
    (!folds.biasless.is_empty() || !folds.norms_folded.is_empty() || !folds.betaless.is_empty()).then_some(folds)
}

/// How an imported graph's own loss is trained: `@loss` returns the
/// output `output`, taking the inputs `data` and then `targets`;
/// `@forward` takes `data` and returns `predictions` (none: the module
/// has no `@forward`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GraphLoss {
    pub output: String,
    pub predictions: Vec<String>,
    pub data: Vec<String>,
    pub targets: Vec<String>,
    /// `(target, data)`: targets the graph shifts itself (Hugging Face's
    /// causal language models: `labels` are the input ids, padded and
    /// sliced from position 1 inside the model). `@loss` takes the next
    /// tokens, as AICF's language models do, and hands the graph the ids
    /// they shift from: the data input's first column, then the targets
    /// but the last.
    pub shifted: Vec<(String, String)>,
    /// The graph's inputs in its own order (`forward(x, targets)`'s), which
    /// `@loss`'s (`data`, then `targets`) may differ from.
    pub graph_order: Vec<String>,
}

impl Imported {
    /// The weights file written beside `mlir` (`model.mlir` ->
    /// `model.weights.safetensors`).
    pub fn weights_path(mlir: &Path) -> PathBuf {
        let stem = mlir.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_else(|| "model".into());
        mlir.with_file_name(format!("{stem}.weights.safetensors"))
    }

    /// The module's text with `hl.weights` naming `file` (relative to the
    /// IR's directory) and the hash of the weights' bytes.
    pub fn text_with_weights(&self, file: &str, hash: &str) -> crate::Result<String> {
        if self.weights.is_empty() {
            return Ok(self.module.text.clone());
        }
        let ctx = crate::CompilerContext::new();
        let module = ctx.parse(&self.module.text, "<imported>")?;
        let w = crate::weights::WeightsRef { file: file.into(), hash: hash.into() };
        let attr = crate::ir::parse_attribute(ctx.mlir().to_raw(), &w.attribute())
            .map_err(|e| crate::CompileError::Internal(format!("hl.weights attribute: {e:?}")))?;
        unsafe {
            mlir_sys::mlirOperationSetAttributeByName(
                module.as_operation().to_raw(),
                crate::ffi::string_ref("hl.weights"),
                attr,
            )
        };
        Ok(crate::pipeline::canonical_text(&module))
    }

    /// The weights as a safetensors file's bytes.
    pub fn weights_bytes(&self) -> Vec<(String, Vec<usize>, Vec<u8>)> {
        self.weights
            .iter()
            .map(|(n, s, v)| (n.clone(), s.clone(), v.iter().flat_map(|x| x.to_le_bytes()).collect()))
            .collect()
    }

    /// Writes `mlir` and its weights file beside it (both atomically).
    /// Nothing is written unless both can be: `mlir` may not be a
    /// directory, and the weights file it implies may only replace the
    /// weights of an earlier import (never a checkpoint, or another
    /// program's safetensors file).
    pub fn write(&self, mlir: &Path) -> crate::Result<()> {
        let weights = Self::weights_path(mlir);
        let io = |path: &Path, message: &str| crate::CompileError::Io {
            path: path.display().to_string(),
            message: message.to_string(),
        };
        if mlir.is_dir() {
            return Err(io(mlir, "a directory: the imported model is written to a file"));
        }
        if !self.weights.is_empty() && std::fs::symlink_metadata(&weights).is_ok() {
            let ours = aicf_runtime::checkpoint::read_metadata(&weights)
                .is_ok_and(|m| m.get("format").is_some_and(|f| f == "aicf-weights") && !m.contains_key("epoch"));
            if !ours || !weights.is_file() {
                return Err(io(
                    &weights,
                    &format!(
                        "the import of {} writes its weights here, and this is not the weights file of an earlier \
                         import (a checkpoint, a directory or another file); move it, or give another output",
                        mlir.display()
                    ),
                ));
            }
        }
        let mut text = self.module.text.clone();
        if !self.weights.is_empty() {
            let entries: Vec<aicf_runtime::checkpoint::Entry> = self
                .weights_bytes()
                .into_iter()
                .map(|(name, shape, bytes)| aicf_runtime::checkpoint::Entry {
                    name,
                    dtype: aicf_runtime::artifact::DType::F32,
                    shape,
                    bytes,
                })
                .collect();
            let meta = BTreeMap::from([("format".to_string(), "aicf-weights".to_string())]);
            aicf_runtime::checkpoint::save(&weights, &entries, &meta)
                .map_err(|e| crate::CompileError::Io { path: weights.display().to_string(), message: e.to_string() })?;
            let hash = aicf_runtime::artifact::file_hash(&weights)
                .map_err(|e| crate::CompileError::Io { path: weights.display().to_string(), message: e.to_string() })?;
            let file = weights.file_name().map(|f| f.to_string_lossy().into_owned()).unwrap_or_default();
            text = self.text_with_weights(&file, &hash)?;
        }
        crate::codegen::write_atomically(mlir, text.as_bytes())
    }
}

/// The names of the graph's outputs but those declared scalars (a loss it
/// computes): what `@forward` of its import returns, in order. Empty where
/// the file does not read.
pub fn output_names(path: &Path) -> Vec<String> {
    use aicf_onnx::proto::type_proto::Value;
    let scalar = |o: &proto::ValueInfoProto| {
        matches!(
            o.r#type.as_ref().and_then(|t| t.value.as_ref()),
            Some(Value::TensorType(t)) if t.shape.as_ref().is_some_and(|s| s.dim.is_empty())
        )
    };
    let Ok(model) = aicf_onnx::load(path) else { return Vec::new() };
    model
        .graph
        .map(|g| g.output.iter().filter(|o| !scalar(o)).filter_map(|o| o.name.clone()).collect())
        .unwrap_or_default()
}

/// The first dimension of the first graph input (not an initializer) of
/// the ONNX model at `path`: `Some(None)` where it is symbolic (the batch
/// `--batch` binds), `Some(Some(d))` where it is fixed; `None` where the
/// file does not read.
pub fn leading_dim(path: &Path) -> Option<Option<usize>> {
    use aicf_onnx::proto::tensor_shape_proto::dimension::Value;
    let model = aicf_onnx::load(path).ok()?;
    let graph = model.graph.as_ref()?;
    let input = graph.input.iter().find(|i| !graph.initializer.iter().any(|t| t.name() == i.name()))?;
    let aicf_onnx::proto::type_proto::Value::TensorType(t) = input.r#type.as_ref()?.value.as_ref()? else {
        return None;
    };
    match t.shape.as_ref()?.dim.first()?.value {
        Some(Value::DimValue(d)) if d > 0 => Some(Some(d as usize)),
        _ => Some(None),
    }
}

/// Whether the ONNX model at `path` computes its own loss, which the
/// import takes by default (`Loss::Auto`): one scalar output that reads an
/// input. `None` where it does not load.
pub fn computes_its_loss(path: &Path) -> Option<bool> {
    let model = aicf_onnx::load(path).ok()?;
    let graph = model.graph.as_ref()?;
    let names: Vec<String> = graph
        .input
        .iter()
        .filter(|i| !graph.initializer.iter().any(|t| t.name() == i.name()))
        .map(|i| i.name().to_string())
        .collect();
    Some(match scalar_outputs(graph)[..] {
        [] => false,
        [one] => {
            let read = reads_of(graph, &[graph.output[one].name()], true);
            names.iter().any(|n| read.contains(n.as_str()))
        }
        _ => true,
    })
}

/// Imports the ONNX model at `path`.
pub fn import(path: &Path, options: &ImportOptions) -> Result<Imported, ImportError> {
    let model = aicf_onnx::load(path)?;
    let base = path.parent().unwrap_or(Path::new("")).to_path_buf();
    import_model(&model, &path.display().to_string(), &base, options)
}

/// Imports a decoded model (`name` in errors, external data under `base`).
///
/// An If whose branch follows the batch size (TorchScript's
/// `squeeze(0)` of a dynamic batch tests whether it is 1) is refused:
/// the import binds the batch, and a variant at another size (a last,
/// smaller batch) would run the branch of the bound one. Found by
/// importing again at other sizes and comparing the branches taken.
pub fn import_model(
    model: &proto::ModelProto,
    name: &str,
    base: &Path,
    options: &ImportOptions,
) -> Result<Imported, ImportError> {
    let imported = import_model_at(model, name, base, options)?;
    // Exported at a static batch of 1 (no dynamic axis) and given a batch:
    // the inputs' leading 1 is taken for the batch (it trained one row a
    // step, --batch unused), where the graph imports so; where an op fixes
    // the batch at 1 (a reshape to [1, -1]), at 1, with the reason.
    if options.batch.is_some_and(|b| b != 1)
        && !imported.symbolic
        && let Some(relaxed) = leading_one_as_batch(model)
    {
        // Each output must come out per row too: a graph that folds the
        // rows together (a reshape to [1, -1] read by a layer as wide)
        // imports, but is no model of a batch.
        let per_row = |again: &Imported| {
            let text = &again.module.text;
            let Some(at) = text.find("func.func @forward(") else { return Ok(()) };
            let line = text[at..].lines().next().unwrap_or_default();
            let results = line.rsplit_once("->").map_or("", |(_, r)| r);
            let batch = options.batch.unwrap_or(1);
            match results.split("tensor<").skip(1).find(|t| !t.starts_with(&format!("{batch}x"))) {
                Some(t) => Err(format!(
                    "@forward returns tensor<{}, not {batch} rows",
                    t.split_whitespace().next().unwrap_or(t).trim_end_matches([',', ')', '{'])
                )),
                None => Ok(()),
            }
        };
        return match import_model(&relaxed, name, base, options).map_err(|e| e.to_string()).and_then(|again| {
            per_row(&again)?;
            Ok(again)
        }) {
            Ok(mut again) => {
                again.batch_of_one = Some(Ok(()));
                Ok(again)
            }
            Err(e) => {
                let mut imported = imported;
                imported.batch_of_one = Some(Err(e.trim_start_matches(&format!("{name}: ")).to_string()));
                Ok(imported)
            }
        };
    }
    if let (Some(batch), true, false) = (options.batch, imported.symbolic, imported.branches.is_empty()) {
        for other in [1, batch + 1] {
            if other == batch {
                continue;
            }
            let again = import_model_at(model, name, base, &ImportOptions { batch: Some(other), ..options.clone() });
            let Ok(again) = again else { continue };
            if let Some(((at, taken), (_, then))) =
                imported.branches.iter().zip(&again.branches).find(|((a, x), (b, y))| a == b && x != y)
            {
                let what = if at.starts_with("Loop") { "its iterations" } else { "its branch" };
                return Err(ImportError::Model {
                    model: name.to_string(),
                    message: format!(
                        "{at} takes {what} by the batch size ({taken} at batch {batch}, {then} at {other}): the \
                         imported model runs every batch size on one graph, so a batch of another size would take \
                         the wrong one; export with a static batch (no dynamic batch axis), where the exporter \
                         decides it"
                    ),
                });
            }
        }
    }
    Ok(imported)
}

/// `model` with each graph input's (and output's) static leading 1 made a
/// symbolic `batch`, where every data input (not an initializer) has one;
/// `None` where not.
fn leading_one_as_batch(model: &proto::ModelProto) -> Option<proto::ModelProto> {
    use proto::tensor_shape_proto::dimension::Value;
    let graph = model.graph.as_ref()?;
    let inits: HashSet<&str> = graph.initializer.iter().map(|t| t.name()).collect();
    let leading = |v: &proto::ValueInfoProto| -> Option<i64> {
        let Some(proto::type_proto::Value::TensorType(t)) = v.r#type.as_ref().and_then(|t| t.value.as_ref()) else {
            return None;
        };
        match t.shape.as_ref()?.dim.first()?.value {
            Some(Value::DimValue(d)) => Some(d),
            _ => None,
        }
    };
    let data: Vec<&proto::ValueInfoProto> = graph.input.iter().filter(|i| !inits.contains(i.name())).collect();
    if data.is_empty() || !data.iter().all(|i| leading(i) == Some(1)) {
        return None;
    }
    let mut relaxed = model.clone();
    let g = relaxed.graph.as_mut()?;
    let batch = |v: &mut proto::ValueInfoProto| {
        if let Some(proto::type_proto::Value::TensorType(t)) = v.r#type.as_mut().and_then(|t| t.value.as_mut())
            && let Some(d) = t.shape.as_mut().and_then(|s| s.dim.first_mut())
            && d.value == Some(Value::DimValue(1))
        {
            d.value = Some(Value::DimParam("batch".into()));
        }
    };
    g.input.iter_mut().filter(|i| !inits.contains(i.name())).for_each(batch);
    g.output.iter_mut().for_each(batch);
    // (Shapes recorded for intermediate values are the batch of 1's; an
    // initializer's record, its exporter's metadata, stays.)
    g.value_info.retain(|v| inits.contains(v.name()));
    Some(relaxed)
}

fn import_model_at(
    model: &proto::ModelProto,
    name: &str,
    base: &Path,
    options: &ImportOptions,
) -> Result<Imported, ImportError> {
    let fail = |message: String| ImportError::Model { model: name.to_string(), message };
    let opset = model
        .opset_import
        .iter()
        .find(|o| o.domain().is_empty() || o.domain() == "ai.onnx")
        .map(|o| o.version())
        .unwrap_or(1);
    if !OPSETS.contains(&opset) {
        return Err(fail(format!(
            "opset {opset} of the default domain is not supported (opsets {} to {})",
            OPSETS.start(),
            OPSETS.end()
        )));
    }
    // (A subgraph's own float initializers in the graph's: weights a loop
    // closes over, which jax2onnx writes into a `fori_loop`'s body, where
    // they stayed constants.)
    let hoisted = hoist_subgraph_initializers(model);
    let model = hoisted.as_ref().unwrap_or(model);
    let graph = model.graph.as_ref().ok_or_else(|| fail("the model has no graph".into()))?;
    let mut inits = HashMap::new();
    for t in &graph.initializer {
        let tensor = aicf_onnx::tensor(t, base)?;
        if inits.insert(t.name().to_string(), tensor).is_some() {
            return Err(fail(format!("initializer '{}' is given twice (which one holds the weights?)", t.name())));
        }
    }
    let mut seen = HashSet::new();
    for i in &graph.input {
        if !seen.insert(i.name()) {
            return Err(fail(format!("graph input '{}' is listed twice", i.name())));
        }
        // An initializer listed as an input is its default value: its
        // declared shape, where it gives one, must be the initializer's.
        if let Some(t) = inits.get(i.name())
            && let Some(dims) = declared_dims(i)
            && (dims.len() != t.dims.len() || dims.iter().zip(&t.dims).any(|(d, &n)| d.is_some_and(|d| d != n)))
        {
            return Err(fail(format!(
                "graph input '{}' is declared [{}] but its initializer is {:?}",
                i.name(),
                dims.iter().map(|d| d.map_or("?".to_string(), |d| d.to_string())).collect::<Vec<_>>().join(", "),
                t.dims
            )));
        }
    }
    let mut seen = HashSet::new();
    for o in &graph.output {
        if !seen.insert(o.name()) {
            return Err(fail(format!("graph output '{}' is listed twice", o.name())));
        }
    }
    // Graph inputs that are not initializers are the model's inputs.
    let mut inputs = Vec::new();
    let mut symbolic = false;
    for i in graph.input.iter().filter(|i| !inits.contains_key(i.name())) {
        let (spec, bound) = input_spec(i, options.batch).map_err(fail)?;
        inputs.push((i.name().to_string(), spec));
        symbolic |= bound;
    }
    if inputs.is_empty() {
        return Err(fail("the graph has no inputs".into()));
    }
    if graph.output.is_empty() {
        return Err(fail("the graph has no outputs".into()));
    }
    // Each name is assigned once, checked over every node.
    let mut written: HashSet<&str> = inits.keys().map(String::as_str).collect();
    written.extend(graph.input.iter().map(|i| i.name()));
    for (index, node) in graph.node.iter().enumerate() {
        if let Some(value) = node.output.iter().find(|o| !o.is_empty() && !written.insert(o.as_str())) {
            return Err(node_error(
                name,
                index,
                node,
                opset,
                format!(
                    "its output '{value}' is already a value of the graph (an input or an earlier node's output): \
                     each name is assigned once"
                ),
            ));
        }
    }
    // Nodes no graph output depends on (an exporter's leftovers: a shape
    // computation, a NonMaxSuppression whose result nothing reads) are left
    // out before anything reads the graph: one of an op AICF lacks failed
    // the import, and their initializers were counted as the model's.
    // (An If's branches read values of the graph around them.)
    let needed = reads_of(graph, &graph.output.iter().map(|o| o.name()).collect::<Vec<_>>(), false);
    let live_graph = proto::GraphProto {
        node: graph.node.iter().filter(|n| n.output.iter().any(|o| needed.contains(o.as_str()))).cloned().collect(),
        name: graph.name.clone(),
        input: graph.input.clone(),
        output: graph.output.clone(),
        value_info: graph.value_info.clone(),
        metadata_props: graph.metadata_props.clone(),
        ..Default::default()
    };
    let graph = &live_graph;
    // (Before any fold of AICF's own.)
    let tf2onnx = model.producer_name() == "tf2onnx";
    // Float types other than f32 the graph declares (its inputs', its
    // initializers'), which AICF computes in f32.
    let other_floats: std::collections::BTreeSet<&'static str> = graph
        .input
        .iter()
        .filter_map(|i| match i.r#type.as_ref().and_then(|t| t.value.as_ref()) {
            Some(proto::type_proto::Value::TensorType(t)) => Some(t.elem_type()),
            _ => None,
        })
        .chain(inits.values().map(|t| t.data_type as i32))
        .filter_map(|t| match DataType::try_from(t) {
            Ok(DataType::Double) => Some("float64"),
            Ok(DataType::Float16) => Some("float16"),
            Ok(DataType::Bfloat16) => Some("bfloat16"),
            _ => None,
        })
        .collect();
    let tf2onnx_folds = tf2onnx.then(|| tf2onnx_folds(graph, &inits)).flatten();
    // Inputs no node reads: the dynamo exporter wires a tensor passed twice
    // (`model(ids, labels=ids)`) to one of its inputs, and the other is
    // read by nothing.
    let unread_inputs: Vec<String> = inputs
        .iter()
        .filter(|(n, _)| !needed.contains(n.as_str()) && !graph.output.iter().any(|o| o.name() == n))
        .map(|(n, _)| n.clone())
        .collect();
    // PyTorch's exporter keeps one initializer of values that are equal,
    // and writes the others as Identity copies of it: in a freshly
    // initialized model a norm's running statistics (zeros, ones) are
    // copies of its bias and weight, and every LayerNorm's weight a copy of
    // the first's. Each copy of an initializer becomes an initializer of
    // its own, starting from those values (the Identity is not traced), so
    // nothing the model had apart is trained tied. (Weights the model ties
    // itself are one initializer read twice, not copies.)
    let mut aliased = HashSet::new();
    for copy in graph.node.iter().filter(|n| n.op_type() == "Identity") {
        let (Some(name), Some(source)) = (copy.output.first(), copy.input.first().and_then(|i| inits.get(i))) else {
            continue;
        };
        if !source.is_float() || inits.contains_key(name) || graph.output.iter().any(|o| o.name() == name) {
            continue;
        }
        let own = aicf_onnx::Tensor { name: name.clone(), ..source.clone() };
        inits.insert(name.clone(), own);
        aliased.insert(name.clone());
    }
    // Linear layers and GELUs the exporter wrote out, folded back
    // (`onnx_fold`).
    // Parameters the dynamo exporter merged as equal, apart again.
    let (mut untied_nodes, untied) = super::onnx_fold::untie(graph, &mut inits);
    // And the zero biases it dropped, back.
    let restored = super::onnx_fold::restore_biases(&mut untied_nodes, &mut inits);
    // And what tf2onnx merged of a fresh Keras model's norms, apart.
    let untied_tf2onnx =
        if tf2onnx { super::onnx_fold::untie_tf2onnx(&mut untied_nodes, &mut inits) } else { Vec::new() };
    // And a tied embedding table under the embedding's name.
    let mut value_info = graph.value_info.clone();
    let renamed_tables =
        super::onnx_fold::name_tables_by_embedding(graph, &mut untied_nodes, &mut value_info, &mut inits);
    // And the parameters it folded into their transposes, read as such.
    let retied = super::onnx_fold::retie_transposes(graph, &mut untied_nodes, &mut inits);
    let untied_graph = proto::GraphProto {
        node: untied_nodes,
        name: graph.name.clone(),
        input: graph.input.clone(),
        output: graph.output.clone(),
        value_info,
        metadata_props: graph.metadata_props.clone(),
        ..Default::default()
    };
    let folded = super::onnx_fold::fold(&untied_graph, &mut inits, &aliased, base);
    let transposed_from: HashMap<String, String> = folded.transposed.into_iter().collect();
    let mut folded_tied = folded.tied;
    folded_tied.extend(retied);
    let folded_graph = proto::GraphProto {
        node: folded.nodes,
        name: graph.name.clone(),
        input: graph.input.clone(),
        output: graph.output.clone(),
        value_info: untied_graph.value_info.clone(),
        // (The exported program's signature: `exporter_constants`.)
        metadata_props: graph.metadata_props.clone(),
        ..Default::default()
    };
    let graph = &folded_graph;
    let states = choose_states(graph, &inits);
    let ExporterRecord { constants: exported_constants, declared, folded_from_parameter, computed } =
        exporter_constants(graph, &inits);
    // A declared parameter trains, a scalar one too (a temperature), where
    // every op reading it takes a computed operand there: a scalar read as
    // an op's constant setting (a Clip's bound, a Pad's value) stays one.
    let computed_operand = |n: &proto::NodeProto, k: usize| {
        matches!(
            n.op_type(),
            "Add"
                | "Sub"
                | "Mul"
                | "Div"
                | "Pow"
                | "Exp"
                | "Log"
                | "Neg"
                | "Abs"
                | "Sqrt"
                | "Reciprocal"
                | "Sigmoid"
                | "Tanh"
                | "Softplus"
                | "Max"
                | "Min"
                | "Concat"
                | "MatMul"
                | "Gemm"
                | "Identity"
                | "Cast"
        ) || (matches!(n.op_type(), "Expand" | "Reshape" | "Unsqueeze" | "Where")
            && k == usize::from(n.op_type() == "Where"))
    };
    let trainable_use = |d: &str| {
        let scalar = inits.get(d).is_some_and(|t| t.dims.is_empty());
        let mut readers = graph
            .node
            .iter()
            .flat_map(|n| n.input.iter().enumerate().filter(|(_, i)| *i == d).map(move |(k, _)| (n, k)))
            .peekable();
        readers.peek().is_some() && (!scalar || readers.all(|(n, k)| computed_operand(n, k)))
    };
    let (mut params, scalar_picks, arithmetic_picks) =
        choose_params(graph, &inits, model.producer_name() == "pytorch", &folded_from_parameter);
    params.extend(
        declared
            .iter()
            .filter(|d| inits.get(*d).is_some_and(|t| t.is_float() && !is_mask(t)) && trainable_use(d))
            .cloned(),
    );
    // `--freeze`: each pattern names initializers (a typo names none:
    // refused, rather than training what it meant to freeze).
    let plain = |pattern: &str, name: &str| match pattern.strip_suffix('*') {
        Some(prefix) => name.starts_with(prefix),
        None => name == pattern,
    };
    // (A table renamed by its embedding answers to the export's name too.)
    let matches = |pattern: &str, name: &str| {
        plain(pattern, name) || renamed_tables.iter().any(|(export, table)| table == name && plain(pattern, export))
    };
    // (A flag's name that matches none is said with some that exist.)
    let some_floats = || {
        let mut names: Vec<&String> = inits.keys().filter(|n| inits[*n].is_float()).collect();
        names.sort();
        let shown: Vec<&str> = names.iter().take(8).map(|n| n.as_str()).collect();
        format!("its float initializers include {}{}", shown.join(", "), if names.len() > 8 { ", ..." } else { "" })
    };
    if let Some(p) = options.freeze.iter().find(|p| !inits.keys().any(|n| matches(p, n))) {
        return Err(fail(format!("--freeze {p}: no initializer of that name ({})", some_floats())));
    }
    let user_frozen: HashSet<String> =
        inits.keys().filter(|n| options.freeze.iter().any(|p| matches(p, n))).cloned().collect();
    // `--trainable`: each pattern names float initializers, none frozen
    // too nor a batch norm's running statistic (which the batch updates).
    let mut user_trainable = HashSet::new();
    for p in &options.trainable {
        let named: Vec<&String> = inits.keys().filter(|n| inits[*n].is_float() && matches(p, n)).collect();
        if named.is_empty() {
            return Err(fail(format!("--trainable {p}: no float initializer of that name ({})", some_floats())));
        }
        if let Some(n) = named.iter().find(|n| user_frozen.contains(**n)) {
            return Err(fail(format!("--trainable {p} and --freeze both name '{n}': give it to one of them")));
        }
        if let Some(n) = named.iter().find(|n| states.contains(**n)) {
            return Err(fail(format!(
                "--trainable {p}: '{n}' is a batch norm's running statistic, which each training batch updates; it \
                 takes no gradient"
            )));
        }
        user_trainable.extend(named.into_iter().cloned());
    }
    params.extend(user_trainable.iter().cloned());
    let params: HashSet<String> = params
        .difference(&states)
        .filter(|p| (user_trainable.contains(*p) || !exported_constants.contains(*p)) && !user_frozen.contains(*p))
        .cloned()
        .collect();
    // A NaN in the weights or state is damage (an export of a model whose
    // training had diverged): the loss was NaN at the first step, naming
    // nothing. (A NaN constant elsewhere, a `where(.., nan)`'s, is a value.)
    let mut weights: Vec<&String> = params.iter().chain(&states).collect();
    weights.sort();
    for w in weights {
        if let Some(t) = inits.get(w).filter(|t| t.is_float())
            && let Some(at) = t.data.to_f64().iter().position(|v| v.is_nan())
        {
            return Err(fail(format!(
                "initializer '{w}' holds NaN (its value {at}, of {}), where the model reads a weight: the exported \
                 weights are damaged (was the model exported after its training diverged?)",
                t.elements()
            )));
        }
    }
    // A parameter the dynamo exporter folded into its broadcast over the
    // batch at a static shape (`cls.expand(B, -1, -1)`, `cls.repeat(B, 1,
    // 1)`: an initializer named by that op, of B equal slices) trains as
    // the one slice it is, broadcast: as B copies, each row's copy took its
    // own gradient and they drifted apart (a row's prediction then
    // depended on its place in the batch).
    let mut broadcast: HashMap<String, Vec<usize>> = HashMap::new();
    // (A folded copy, never a parameter the program declares; of one
    // parameter; as many copies as the input has rows.)
    let rows = inputs.first().and_then(|(_, s)| s.shape.first().copied());
    for p in &params {
        let base = match p.rsplit_once('_') {
            Some((b, n)) if n.bytes().all(|c| c.is_ascii_digit()) => b,
            _ => p.as_str(),
        };
        let Some(t) = inits.get(p) else { continue };
        if !matches!(base, "expand" | "repeat")
            || declared.contains(p)
            || folded_from_parameter.get(p) != Some(&1)
            || t.dims.len() < 2
            || t.dims[0] < 2
            || Some(t.dims[0]) != rows
        {
            continue;
        }
        let aicf_onnx::Data::F32(values) = &t.data else { continue };
        let slice = values.len() / t.dims[0];
        if slice > 0 && values.chunks(slice).all(|c| c == &values[..slice]) {
            broadcast.insert(p.clone(), t.dims.clone());
        }
    }
    for (p, full) in &broadcast {
        if let Some(t) = inits.get_mut(p)
            && let aicf_onnx::Data::F32(values) = &mut t.data
        {
            values.truncate(values.len() / full[0]);
            t.dims[0] = 1;
        }
    }
    let (masks, frozen): (Vec<_>, Vec<_>) = frozen_initializers(graph, &inits, &params, &states)
        .into_iter()
        .partition(|(n, _)| inits.get(n).is_some_and(is_mask));
    let (exported_constants, frozen): (Vec<_>, Vec<_>) =
        frozen.into_iter().partition(|(n, _)| exported_constants.contains(n));
    let (frozen_by_option, frozen): (Vec<_>, Vec<_>) = frozen.into_iter().partition(|(n, _)| user_frozen.contains(n));
    let mut shared_norms: Vec<(String, usize)> = Vec::new();
    for norm in graph.node.iter().filter(|n| {
        matches!(n.op_type(), "LayerNormalization" | "RMSNormalization" | "GroupNormalization" | "BatchNormalization")
    }) {
        for name in norm.input.iter().skip(1).take(2).filter(|n| params.contains(*n)) {
            match shared_norms.iter_mut().find(|(n, _)| n == name) {
                Some(entry) => entry.1 += 1,
                None => shared_norms.push((name.clone(), 1)),
            }
        }
    }
    shared_norms.retain(|(_, uses)| *uses > 1);
    // Likewise a weight or bias several layers read (the dynamo exporter
    // merges the equal layers of a freshly copied stack); an embedding
    // table read again by a tied output layer is one use of each kind.
    let mut shared_weights: Vec<(String, usize)> = Vec::new();
    for node in graph.node.iter().filter(|n| matches!(n.op_type(), "Gemm" | "MatMul" | "Conv" | "Add" | "Sub" | "Mul"))
    {
        let mut seen = HashSet::new();
        for name in node.input.iter().filter(|n| params.contains(*n) && seen.insert(n.as_str())) {
            match shared_weights.iter_mut().find(|(n, _)| n == name) {
                Some(entry) => entry.1 += 1,
                None => shared_weights.push((name.clone(), 1)),
            }
        }
    }
    shared_weights.retain(|(_, uses)| *uses > 1);
    // The graph's own loss (`--loss graph`, or by default where it has
    // one scalar output): which output, and which inputs @forward takes.
    let scalars = scalar_outputs(graph);
    let all_names: Vec<String> = inputs.iter().map(|(n, _)| n.clone()).collect();
    let loss_at = match &options.loss {
        Loss::Graph(wanted) => Some(graph_loss_output(graph, wanted.as_deref()).map_err(fail)?),
        // (A scalar that reads no input, a learned temperature returned
        // beside the logits, is no loss.)
        Loss::Auto => match scalars[..] {
            [] => None,
            [one] => {
                let read = reads_of(graph, &[graph.output[one].name()], true);
                all_names.iter().any(|n| read.contains(n.as_str())).then_some(one)
            }
            // (Several: the error that names them.)
            _ => match graph_loss_output(graph, None) {
                Err(e) => return Err(fail(e)),
                Ok(one) => Some(one),
            },
        },
        _ => None,
    };
    let loss = match (&options.loss, loss_at) {
        (_, Some(_)) => Loss::Graph(loss_at.map(|at| graph.output[at].name().to_string())),
        (Loss::Auto, None) => Loss::CrossEntropy,
        (other, None) => other.clone(),
    };
    if let Some(i) = options.ignore_index
        && loss != Loss::CrossEntropy
    {
        let graph =
            if matches!(loss, Loss::Graph(_)) { " (a graph's own loss ignores what it was exported with)" } else { "" };
        return Err(fail(format!(
            "--ignore-index {i} is a label the cross-entropy AICF adds leaves out; this model's loss is {}{graph}",
            loss.name()
        )));
    }
    let mut graph_loss = None;
    if let Some(at) = loss_at {
        // (Another scalar output is a figure of the batch, an accuracy,
        // no prediction of its rows: @forward leaves it out, and with it
        // the labels it reads.)
        let predicted: Vec<&str> = graph
            .output
            .iter()
            .enumerate()
            .filter(|(k, _)| *k != at && !scalars.contains(k))
            .map(|(_, o)| o.name())
            .collect();
        let read = reads_of(graph, &predicted, true);
        // @forward takes the inputs the predictions read; @loss those and
        // then the others (the targets), in the graph's order.
        // (No prediction, or none that reads an input: the first input is
        // the data, as an hl model without @forward reads its @loss, and
        // the others the targets.)
        let first_only = !all_names.iter().any(|n| read.contains(n.as_str()));
        let (data, targets): (Vec<_>, Vec<_>) = inputs
            .drain(..)
            .enumerate()
            .partition(|(k, (n, _))| if first_only { *k == 0 } else { read.contains(n.as_str()) });
        let (data, targets): (Vec<_>, Vec<_>) =
            (data.into_iter().map(|(_, i)| i).collect(), targets.into_iter().map(|(_, i)| i).collect());
        let target_names: Vec<String> = targets.iter().map(|(n, _)| n.clone()).collect();
        let data_names: Vec<String> = data.iter().map(|(n, _)| n.clone()).collect();
        inputs = data.into_iter().chain(targets).collect();
        // A target of a token sequence's shape that the graph shifts
        // itself reads the ids of that sequence.
        let shifted = target_names
            .iter()
            .filter_map(|t| {
                let spec = &inputs.iter().find(|(n, _)| n == t)?.1;
                let ids = inputs.iter().find(|(n, s)| {
                    data_names.contains(n) && s == spec && spec.shape.len() == 2 && !spec.dtype.is_float()
                })?;
                shifts_target(graph, &inits, base, t).then(|| (t.clone(), ids.0.clone()))
            })
            .collect();
        graph_loss = Some(GraphLoss {
            output: graph.output[at].name().to_string(),
            predictions: predicted.iter().map(|s| s.to_string()).collect(),
            data: data_names,
            targets: target_names,
            shifted,
            graph_order: all_names.clone(),
        });
    }
    let specs: Vec<TensorSpec> = inputs.iter().map(|(_, s)| s.clone()).collect();
    let names: Vec<String> = inputs.iter().map(|(n, _)| n.clone()).collect();
    let mut importer = Importer {
        name: name.to_string(),
        opset,
        graph,
        inits: &inits,
        params: &params,
        states: &states,
        base,
        names: HashMap::new(),
        trains: loss != Loss::None,
        aliased: &aliased,
        broadcast: &broadcast,
        branches: Vec::new(),
        input_specs: inputs.clone(),
        shape_placeholders: false,
        sequences: HashMap::new(),
        padding: padding_rows(graph).into_iter().collect(),
        bound_batch: if symbolic { options.batch } else { None },
        batch_sizes: HashMap::new(),
        reshaped_from: HashMap::new(),
        softmax_logits: None,
        tf2onnx,
        pytorch: model.producer_name() == "pytorch",
        legacy_names: options.legacy_names,
        empty_scans: HashSet::new(),
        inference_dropouts: Default::default(),
        seeded_random: Default::default(),
    };
    let mut b = ModuleBuilder::new();
    let mut error = None;
    let mut dead_softmax = false;
    if let (Some(at), Some(gl)) = (loss_at, &graph_loss) {
        if !gl.predictions.is_empty() {
            let outputs: Vec<usize> = (0..graph.output.len())
                .filter(|k| gl.predictions.iter().any(|p| p == graph.output[*k].name()))
                .collect();
            let data_specs = &specs[..gl.data.len()];
            let traced = b.function("forward", Mode::Eval, data_specs, |xs| {
                importer.trace_of(xs, &gl.data, &outputs).map_err(|e| {
                    error = Some(e);
                    nn::NnError::Internal("import failed".into())
                })
            });
            if let Some(e) = error.take() {
                return Err(e);
            }
            traced.map_err(|e| fail(format!("tracing @forward: {e}")))?;
        }
        let output = gl.output.clone();
        let traced = b.function("loss", Mode::Train, &specs, |xs| {
            // A target the graph shifts itself: the ids it shifts from.
            let mut xs = xs.to_vec();
            for (target, data) in &gl.shifted {
                let (Some(t), Some(d)) = (names.iter().position(|n| n == target), names.iter().position(|n| n == data))
                else {
                    continue;
                };
                let len = xs[t].shape()[1];
                let first = xs[d].narrow(1, 0, 1)?;
                xs[t] = if len > 1 { Tensor::concat(&[&first, &xs[t].narrow(1, 0, len - 1)?], 1)? } else { first };
            }
            let outs = importer.trace_of(&xs, &names, &[at]).map_err(|e| {
                error = Some(e);
                nn::NnError::Internal("import failed".into())
            })?;
            let l = &outs[0];
            if !l.dtype().is_float() || l.spec().num_elements() != 1 {
                return Err(nn::NnError::Invalid {
                    layer: None,
                    message: format!(
                        "the graph's loss '{output}' is {}: a loss is one floating-point value (reduce it in the \
                         model, or import with --loss cross_entropy or mse on the first output)",
                        l.spec()
                    ),
                });
            }
            let l = if l.rank() == 0 { l.clone() } else { l.reshape(&[])? };
            Ok(vec![if l.dtype() == DType::F32 { l } else { l.cast(DType::F32)? }])
        });
        if let Some(e) = error.take() {
            return Err(e);
        }
        traced.map_err(|e| fail(format!("tracing @loss: {e}")))?;
    } else {
        let every: Vec<usize> = (0..graph.output.len()).collect();
        let traced = b.function("forward", Mode::Eval, &specs, |xs| {
            importer.trace_of(xs, &all_names, &every).map_err(|e| {
                error = Some(e);
                nn::NnError::Internal("import failed".into())
            })
        });
        if let Some(e) = error.take() {
            return Err(e);
        }
        let forward = traced.map_err(|e| fail(format!("tracing @forward: {e}")))?;
        if loss != Loss::None {
            let out = forward.outputs.first().cloned().ok_or_else(|| fail("the graph has no outputs".into()))?;
            // A loss differentiates the output: an integer or boolean one has no
            // gradient (a comparison, a count, an index).
            if !out.dtype.is_float() {
                let name = graph.output.first().map_or("", |o| o.name());
                return Err(fail(format!(
                    "--loss {} needs a floating-point first output; '{name}' is {} (--loss none imports it to run \
                     forward only)",
                    loss.name(),
                    out.mlir_type()
                )));
            }
            let target = match loss {
                Loss::CrossEntropy => {
                    if out.shape.len() < 2 {
                        return Err(fail(format!(
                            "--loss cross_entropy takes logits [..., classes]; the first output is {}",
                            out.mlir_type()
                        )));
                    }
                    TensorSpec::new(&out.shape[..out.shape.len() - 1], DType::I32)
                }
                _ => out.clone(),
            };
            let mut loss_inputs = specs.clone();
            loss_inputs.push(target);
            let mse = loss == Loss::Mse;
            let traced = b.function("loss", Mode::Train, &loss_inputs, |xs| {
                let (x, target) = xs.split_at(xs.len() - 1);
                importer.softmax_logits = None;
                let outs = importer.trace_of(x, &all_names, &every).map_err(|e| {
                    error = Some(e);
                    nn::NnError::Internal("import failed".into())
                })?;
                // A model that returns probabilities (a final Softmax) is
                // trained on the cross-entropy of the logits before it:
                // -log p, as Keras's sparse_categorical_crossentropy of
                // probabilities and PyTorch's NLLLoss of their log. (Of
                // the probabilities themselves, taken as logits, the loss
                // stalled.)
                let logits = importer.softmax_logits.take().filter(|_| !mse);
                // (The Softmax left unread, removed below.)
                dead_softmax = logits.is_some();
                let y = logits.as_ref().unwrap_or(&outs[0]);
                Ok(vec![if mse {
                    y.mse_loss(&target[0], Reduction::Mean)?
                } else {
                    y.cross_entropy(&target[0], Reduction::Mean, options.ignore_index)?
                }])
            });
            if let Some(e) = error.take() {
                return Err(e);
            }
            traced.map_err(|e| fail(format!("tracing @loss: {e}")))?;
        }
    }
    let mut module = b.finish().map_err(|e| fail(format!("the imported module: {e}")))?;
    // Linear layers of flattened rows, unflattened (`onnx_fold`).
    {
        let canonicalize = importer.shape_placeholders || dead_softmax;
        let ctx = crate::CompilerContext::new();
        let parsed = ctx.parse(&module.text, name).map_err(|e| fail(format!("the imported module: {e}")))?;
        let mut parsed = parsed;
        if canonicalize {
            crate::run_pipeline(&ctx, &mut parsed, "builtin.module(func.func(canonicalize))")
                .map_err(|e| fail(format!("the imported module: {e}")))?;
        }
        if super::onnx_fold::fold_reshaped_linears(parsed.as_operation().to_raw()) > 0 || canonicalize {
            module.text = crate::pipeline::canonical_text(&parsed);
        }
    }
    // Inputs a text cannot give: a Hugging Face model's attention mask
    // (ones over a text's whole windows) and token type ids (zeros), marked
    // on @forward's and @loss's arguments (`hl.fill`) for the trainer.
    let fills: Vec<(String, f64)> = inputs
        .iter()
        .skip(1)
        .filter(|(_, spec)| !spec.dtype.is_float() && spec.shape == inputs[0].1.shape)
        .filter_map(|(n, _)| {
            let lower = n.to_lowercase();
            let value = if lower.ends_with("attention_mask") {
                1.0
            } else if lower.ends_with("token_type_ids") {
                0.0
            } else {
                return None;
            };
            Some((n.clone(), value))
        })
        .collect();
    // And every data argument's ONNX name (`hl.name`), which arrays named
    // so are matched to (`--data attention_mask.npy --data input_ids.npy`
    // fed each other's input without a word).
    {
        let forward_names: Vec<&String> = match &graph_loss {
            Some(gl) => gl.data.iter().collect(),
            None => inputs.iter().map(|(n, _)| n).collect(),
        };
        let loss_names: Vec<&String> = inputs.iter().map(|(n, _)| n).collect();
        let ctx = crate::CompilerContext::new();
        let parsed = ctx.parse(&module.text, name).map_err(|e| fail(format!("the imported module: {e}")))?;
        for (func, block) in crate::ir::functions(parsed.as_operation().to_raw()) {
            let names = match crate::ir::string_attr(func, "sym_name").as_deref() {
                Some("forward") => &forward_names,
                Some("loss") => &loss_names,
                _ => continue,
            };
            let count = unsafe { mlir_sys::mlirBlockGetNumArguments(block) } as usize;
            let dicts: Vec<String> = (0..count)
                .map(|i| {
                    let mut entries = Vec::new();
                    if let Some((_, v)) = names.get(i).and_then(|n| fills.iter().find(|(f, _)| f == *n)) {
                        entries.push(format!("hl.fill = {} : f64", crate::nn::ops::float_literal(*v, DType::F64)));
                    }
                    if let Some(n) = names.get(i) {
                        entries.push(format!("hl.name = {}", crate::ir::quoted(n)));
                    }
                    format!("{{{}}}", entries.join(", "))
                })
                .collect();
            let attr = crate::ir::parse_attribute(ctx.mlir().to_raw(), &format!("[{}]", dicts.join(", ")))
                .map_err(|e| fail(format!("the imported module's argument attributes: {e:?}")))?;
            unsafe { mlir_sys::mlirOperationSetAttributeByName(func, crate::ffi::string_ref("arg_attrs"), attr) };
        }
        module.text = crate::pipeline::canonical_text(&parsed);
    }
    let mut weights = Vec::new();
    let mut sources = Vec::new();
    let mut exporter_named = Vec::new();
    let dynamo = dynamo_export(graph);
    for p in &module.params {
        let onnx_name = importer.names.iter().find(|(_, hl)| **hl == p.name).map(|(o, _)| o.clone());
        let t = onnx_name.and_then(|o| inits.get(&o)).ok_or_else(|| fail(format!("no initializer for @{}", p.name)))?;
        // (A PReLU's slope the exporter reshaped to [C, 1, 1] is the
        // parameter itself.)
        if !dynamo
            && t.name.starts_with("onnx::")
            && !t.name.starts_with("onnx::PRelu_")
            && !transposed_from.contains_key(&t.name)
        {
            exporter_named.push(t.name.clone());
        }
        sources.push(transposed_from.get(&t.name).unwrap_or(&t.name).clone());
        let aicf_onnx::Data::F32(values) = &t.data else {
            return Err(fail(format!("initializer '{}' is not floating point", t.name)));
        };
        weights.push((p.name.clone(), t.dims.clone(), values.clone()));
    }
    for st in &module.states {
        let onnx_name = importer.names.iter().find(|(_, hl)| **hl == st.name).map(|(o, _)| o.clone());
        let t =
            onnx_name.and_then(|o| inits.get(&o)).ok_or_else(|| fail(format!("no initializer for @{}", st.name)))?;
        let aicf_onnx::Data::F32(values) = &t.data else {
            return Err(fail(format!("initializer '{}' is not floating point", t.name)));
        };
        weights.push((st.name.clone(), t.dims.clone(), values.clone()));
    }
    let transposed = module
        .params
        .iter()
        .filter_map(|p| importer.names.iter().find(|(_, hl)| **hl == p.name))
        .filter_map(|(onnx, _)| transposed_from.get(onnx).cloned())
        .collect();
    let transposed_in_place = module
        .params
        .iter()
        .filter(|p| importer.names.iter().any(|(onnx, hl)| *hl == p.name && transposed_from.get(onnx) == Some(onnx)))
        .map(|p| p.name.clone())
        .collect();
    let softmax_node = (loss == Loss::CrossEntropy)
        .then(|| graph.output.first().map(|o| o.name()))
        .flatten()
        .and_then(|out| graph.node.iter().find(|n| n.output.iter().any(|o| o == out)))
        .filter(|n| n.op_type() == "Softmax")
        .map(node_label);
    Ok(Imported {
        module,
        weights,
        sources,
        transposed,
        transposed_in_place,
        tied: folded_tied,
        opset,
        producer: model.producer_name().to_string(),
        other_floats: other_floats.iter().map(|t| t.to_string()).collect(),
        inference_dropouts: importer.inference_dropouts.borrow().iter().cloned().collect(),
        seeded_random: importer.seeded_random.borrow().iter().cloned().collect(),
        inputs,
        symbolic,
        batch_of_one: None,
        frozen,
        exported_constants,
        scalar_params: {
            let mut s: Vec<String> = scalar_picks.iter().filter(|n| params.contains(*n)).cloned().collect();
            s.sort();
            s
        },
        arithmetic_params: {
            let mut s: Vec<String> = arithmetic_picks.iter().filter(|n| params.contains(*n)).cloned().collect();
            s.sort();
            s
        },
        exporter_named,
        computed_folds: {
            let mut c: Vec<(String, Vec<String>)> = computed
                .iter()
                .filter(|(name, _)| params.contains(*name) && !broadcast.contains_key(*name))
                .map(|(n, ops)| (n.clone(), ops.clone()))
                .collect();
            c.sort();
            c
        },
        constant_folds: {
            let mut c: Vec<(String, Vec<String>)> = computed
                .iter()
                .filter(|(name, _)| !params.contains(*name))
                .filter(|(name, _)| graph.node.iter().any(|n| n.input.iter().any(|i| i == *name)))
                .map(|(n, ops)| (n.clone(), ops.clone()))
                .collect();
            c.sort();
            c
        },
        frozen_by_option,
        broadcast: {
            let mut b: Vec<(String, usize)> = broadcast.iter().map(|(p, full)| (p.clone(), full[0])).collect();
            b.sort();
            b
        },
        masks,
        shared_norms,
        shared_weights,
        untied,
        restored,
        renamed_tables,
        untied_tf2onnx,
        padding_rows: padding_rows(graph),
        folded_norms: folded_norms(graph),
        fills,
        noise: nodes_within(graph)
            .into_iter()
            .filter(|n| NOISE.contains(&n.op_type()))
            .map(|n| (n.op_type().to_string(), n.output.first().cloned().unwrap_or_default()))
            .collect(),
        noise_seeded: nodes_within(graph)
            .into_iter()
            .any(|n| NOISE.contains(&n.op_type()) && attr(n, "seed").is_some()),
        branches: importer.branches.clone(),
        graph_loss,
        unread_inputs,
        dynamo,
        dynamo_records_lost: dynamo_records_lost(graph),
        tf2onnx_folds,
        // (Over the last axis, the class axis, @loss takes its logits;
        // over another, the probabilities, said apart.)
        softmax_output: softmax_node.clone().filter(|_| dead_softmax),
        softmax_output_other_axis: softmax_node.filter(|_| !dead_softmax),
    })
}

/// The graph's outputs it declares one floating-point value (rank 0),
/// by index: a loss the model computes.
fn scalar_outputs(graph: &proto::GraphProto) -> Vec<usize> {
    graph
        .output
        .iter()
        .enumerate()
        .filter(|(_, o)| {
            let Some(proto::type_proto::Value::TensorType(t)) = o.r#type.as_ref().and_then(|t| t.value.as_ref()) else {
                return false;
            };
            let float = DataType::try_from(t.elem_type()).is_ok_and(is_float_type);
            float && t.shape.as_ref().is_some_and(|s| s.dim.is_empty())
        })
        .map(|(k, _)| k)
        .collect()
}

/// The output `--loss graph[:NAME]` trains: the one named, or the one
/// scalar float output.
fn graph_loss_output(graph: &proto::GraphProto, wanted: Option<&str>) -> Result<usize, String> {
    let listed = || {
        graph
            .output
            .iter()
            .map(|o| {
                let shape = declared_dims(o).map_or("shape not declared".to_string(), |d| {
                    format!(
                        "[{}]",
                        d.iter().map(|d| d.map_or("?".to_string(), |d| d.to_string())).collect::<Vec<_>>().join(", ")
                    )
                });
                format!("'{}' {shape}", o.name())
            })
            .collect::<Vec<_>>()
            .join(", ")
    };
    if let Some(w) = wanted {
        return graph
            .output
            .iter()
            .position(|o| o.name() == w)
            .ok_or_else(|| format!("--loss graph:{w}: the graph has no output '{w}' (its outputs: {})", listed()));
    }
    match scalar_outputs(graph)[..] {
        [one] => Ok(one),
        [] => Err(format!(
            "--loss graph trains the graph's own loss, its one scalar float output, and it has none (its outputs: {}); \
             name the output with --loss graph:NAME, or train the first output with --loss cross_entropy or mse",
            listed()
        )),
        ref several => Err(format!(
            "the graph has {} scalar float outputs ({}): name the one that is the loss with --loss graph:NAME",
            several.len(),
            several.iter().map(|&k| format!("'{}'", graph.output[k].name())).collect::<Vec<_>>().join(", ")
        )),
    }
}

/// The values the graph reads to compute `outputs` (its inputs among
/// them), through every node they depend on and what an If's branches
/// read; with `values_only`, not through a Shape, which reads a value's
/// shape alone (TorchScript's `mse_loss(p, t)` expands the prediction to
/// the shape `p + t` broadcasts to).
fn reads_of<'g>(graph: &'g proto::GraphProto, outputs: &[&'g str], values_only: bool) -> HashSet<&'g str> {
    let mut needed: HashSet<&str> = outputs.iter().copied().collect();
    for node in graph.node.iter().rev() {
        if node.output.iter().any(|o| needed.contains(o.as_str())) {
            if !(values_only && node.op_type() == "Shape") {
                needed.extend(node.input.iter().filter(|i| !i.is_empty()).map(String::as_str));
            }
            needed.extend(subgraph_reads(node));
        }
    }
    needed
}

/// An integer constant of the graph: an initializer's values, or a
/// Constant node's.
fn constant_ints(
    graph: &proto::GraphProto,
    inits: &HashMap<String, aicf_onnx::Tensor>,
    base: &Path,
    name: &str,
) -> Option<Vec<i64>> {
    if let Some(t) = inits.get(name) {
        return Some(t.data.to_f64().iter().map(|&v| v as i64).collect());
    }
    let node = graph.node.iter().find(|n| n.output.first().is_some_and(|o| o == name))?;
    // (An unoptimized dynamo export reshapes its constants: the values as
    // they are.)
    if matches!(node.op_type(), "Reshape" | "Identity" | "Cast" | "Squeeze" | "Unsqueeze") {
        return constant_ints(graph, inits, base, node.input.first()?);
    }
    if node.op_type() != "Constant" {
        return None;
    }
    let a = node.attribute.first()?;
    match a.name() {
        "value" => Some(aicf_onnx::tensor(a.t.as_ref()?, base).ok()?.data.to_f64().iter().map(|&v| v as i64).collect()),
        "value_int" => Some(vec![a.i()]),
        "value_ints" => Some(a.ints.clone()),
        _ => None,
    }
}

/// Whether the graph shifts its target `name` (`[batch, sequence]`) one
/// position left before anything else reads it, as Hugging Face's causal
/// language models' loss does (`labels` are the input ids, and position
/// `t`'s logits are scored against `labels[t + 1]`): padded or
/// concatenated at the end and sliced from 1 along the sequence
/// (transformers 4.4x and later); or sliced from 1 while some value of
/// the graph is sliced to its last position but one (`logits[:, :-1]`,
/// the older form and nanoGPT-style code). A tagger that drops position 0
/// of both (`logits[:, 1:]`, `labels[:, 1:]`) shifts nothing.
fn shifts_target(
    graph: &proto::GraphProto,
    inits: &HashMap<String, aicf_onnx::Tensor>,
    base: &Path,
    name: &str,
) -> bool {
    let only_reader = |v: &str| {
        let readers: Vec<&proto::NodeProto> = graph.node.iter().filter(|n| n.input.iter().any(|i| i == v)).collect();
        match readers[..] {
            [one] if one.input.first().is_some_and(|i| i == v) => Some(one),
            _ => None,
        }
    };
    // A Slice's (start, end, step) along the sequence (axis 1, or `axis`
    // counted from the end), where it slices no other axis.
    let along = |node: &proto::NodeProto, from_end: i64| -> Option<(i64, i64, i64)> {
        let ints = |k: usize, attribute: &str| match node.input.get(k).filter(|i| !i.is_empty()) {
            Some(i) => constant_ints(graph, inits, base, i),
            None => attr_ints(node, attribute),
        };
        let (starts, ends) = (ints(1, "starts")?, ints(2, "ends")?);
        let axes = ints(3, "axes").unwrap_or_else(|| (0..starts.len() as i64).collect());
        let steps = ints(4, "steps");
        let [axis] = axes[..] else { return None };
        (axis == 1 || axis == from_end).then_some(())?;
        Some((*starts.first()?, *ends.first()?, steps.as_ref().map_or(Some(1), |s| s.first().copied())?))
    };
    // (Through a Cast or an Identity: OPT's TorchScript export casts the
    // labels before it pads them.)
    let next_reader = |v: &str| {
        let mut node = only_reader(v)?;
        while matches!(node.op_type(), "Cast" | "Identity") {
            node = only_reader(node.output.first()?)?;
        }
        Some(node)
    };
    let Some(mut node) = next_reader(name) else { return false };
    let padded = matches!(node.op_type(), "Pad" | "Concat");
    if padded {
        let Some(next) = node.output.first().and_then(|o| next_reader(o)) else { return false };
        node = next;
    }
    if node.op_type() != "Slice" || along(node, -1).is_none_or(|(start, _, step)| start != 1 || step != 1) {
        return false;
    }
    padded
        || graph.node.iter().any(|n| {
            n.op_type() == "Slice"
                && along(n, -2).is_some_and(|(start, end, step)| start == 0 && end == -1 && step == 1)
        })
}

/// The batch norms a dynamo export's optimizer folded into the layer
/// before them, from the layer's metadata: its rewrite rule
/// (`pkg.onnxscript.rewriter.rule_name` naming `FuseBatchNorm...`), the
/// norm's module (`pkg.torch.onnx.name_scopes`, the scope before the op's)
/// and its `training` argument (the sixth of `aten.batch_norm` and
/// `aten._native_batch_norm_legit_functional`).
fn folded_norms(graph: &proto::GraphProto) -> Vec<(String, bool)> {
    let meta = |n: &proto::NodeProto, key: &str| {
        n.metadata_props.iter().find(|p| p.key() == key).map(|p| p.value().to_string())
    };
    graph
        .node
        .iter()
        .filter(|n| meta(n, "pkg.onnxscript.rewriter.rule_name").is_some_and(|r| r.contains("FuseBatchNorm")))
        .map(|n| {
            let scopes = meta(n, "pkg.torch.onnx.name_scopes").unwrap_or_default();
            let scopes: Vec<&str> =
                scopes.trim_matches(['[', ']']).split(',').map(|s| s.trim().trim_matches('\'')).collect();
            let module = match scopes.len() {
                2.. if !scopes[scopes.len() - 2].is_empty() => scopes[scopes.len() - 2].to_string(),
                _ => n.name().to_string(),
            };
            let fx = meta(n, "pkg.torch.onnx.fx_node").unwrap_or_default();
            let training = fx.contains("batch_norm")
                && fx.split("args = (").nth(1).and_then(|a| a.split(", ").nth(5)).is_some_and(|t| t == "True");
            (module, training)
        })
        .collect()
}

/// The ops that draw noise.
pub(crate) const NOISE: &[&str] =
    &["RandomNormal", "RandomNormalLike", "RandomUniform", "RandomUniformLike", "Bernoulli"];

/// The embeddings a dynamo export declares with a padding index: a
/// Gather whose `pkg.torch.onnx.fx_node` is `aten.embedding.default(w, x,
/// p)` (the third argument, where given and not -1), as (table, p).
fn padding_rows(graph: &proto::GraphProto) -> Vec<(String, i64)> {
    graph
        .node
        .iter()
        .filter(|n| n.op_type() == "Gather")
        .filter_map(|n| {
            let fx = n.metadata_props.iter().find(|p| p.key() == "pkg.torch.onnx.fx_node")?.value();
            let args = fx.split("aten.embedding.default](args = (").nth(1)?.split(')').next()?;
            let p: i64 = args.split(',').nth(2)?.trim().parse().ok()?;
            let table = n.input.first()?.clone();
            (p != -1).then_some((table, p))
        })
        .collect()
}

/// A graph input's static spec: known dimensions as they are, the first
/// symbolic or unknown one bound to `batch`; floats as f32, integers as
/// i32 (token ids, labels), booleans as i1. With it, whether `batch` bound
/// a dimension (a symbolic one without `batch` is an error).
fn input_spec(i: &proto::ValueInfoProto, batch: Option<usize>) -> Result<(TensorSpec, bool), String> {
    use proto::tensor_shape_proto::dimension::Value;
    let Some(proto::type_proto::Value::TensorType(t)) = i.r#type.as_ref().and_then(|t| t.value.as_ref()) else {
        return Err(format!("input '{}' is not a tensor", i.name()));
    };
    let dtype = match DataType::try_from(t.elem_type()) {
        Ok(DataType::Float | DataType::Double | DataType::Float16 | DataType::Bfloat16) => DType::F32,
        Ok(DataType::Int64 | DataType::Int32 | DataType::Int16 | DataType::Int8 | DataType::Uint8) => DType::I32,
        Ok(DataType::Bool) => DType::I1,
        _ => return Err(format!("input '{}' has element type {}", i.name(), aicf_onnx::type_name(t.elem_type()))),
    };
    let shape = t.shape.as_ref().ok_or_else(|| format!("input '{}' has no shape", i.name()))?;
    if batch == Some(0) {
        return Err("--batch 0: a batch has at least one row".into());
    }
    let mut dims = Vec::new();
    let mut bound = false;
    for (k, d) in shape.dim.iter().enumerate() {
        match &d.value {
            Some(Value::DimValue(v)) if *v > 0 => dims.push(*v as usize),
            Some(Value::DimValue(v)) if *v < 0 => {
                return Err(format!("input '{}' dimension {k} is {v}, not a size", i.name()));
            }
            Some(Value::DimValue(_)) => {
                return Err(format!(
                    "input '{}' dimension {k} is 0: an empty tensor, which AICF does not compile (a dimension the \
                     batch binds is symbolic or unset, not 0)",
                    i.name()
                ));
            }
            other => {
                let what = match other {
                    Some(Value::DimParam(p)) => format!("'{p}'"),
                    _ => "unknown".to_string(),
                };
                match batch {
                    Some(b) if !bound && b > 0 => {
                        dims.push(b);
                        bound = true;
                    }
                    Some(_) if bound => {
                        return Err(format!(
                            "input '{}' dimension {k} is {what}, and --batch binds only one dimension: AICF \
                             compiles static shapes, so export the model with this dimension fixed (in PyTorch, \
                             dynamic_axes, or dynamic_shapes, naming the batch alone; in Keras, an Input shape \
                             without None past the batch, or tf2onnx's input_signature)",
                            i.name()
                        ));
                    }
                    _ => {
                        return Err(format!(
                            "input '{}' dimension {k} is {what}: give --batch to make it static",
                            i.name()
                        ));
                    }
                }
            }
        }
    }
    Ok((TensorSpec::new(dims, dtype), bound))
}

/// A value's declared dimensions (`None` for a symbolic or unknown one),
/// when it declares a shape.
fn declared_dims(o: &proto::ValueInfoProto) -> Option<Vec<Option<usize>>> {
    use proto::tensor_shape_proto::dimension::Value;
    let Some(proto::type_proto::Value::TensorType(t)) = o.r#type.as_ref().and_then(|t| t.value.as_ref()) else {
        return None;
    };
    let shape = t.shape.as_ref()?;
    Some(
        shape
            .dim
            .iter()
            .map(|d| match d.value {
                Some(Value::DimValue(v)) if v > 0 => Some(v as usize),
                _ => None,
            })
            .collect(),
    )
}

/// The float initializers that become model state: a batch norm's running
/// mean and variance.
fn choose_states(graph: &proto::GraphProto, inits: &HashMap<String, aicf_onnx::Tensor>) -> HashSet<String> {
    graph
        .node
        .iter()
        .filter(|n| n.op_type() == "BatchNormalization")
        .flat_map(|n| n.input.iter().skip(3).take(2))
        .filter(|n| inits.get(*n).is_some_and(|t| t.is_float()))
        .cloned()
        .collect()
}

/// The float initializers that become trainable parameters: those a node
/// uses as a weight, directly or through ops that only move or reshape
/// values (PyTorch's training-mode export writes a linear layer as
/// `MatMul(x, Transpose(W))`, and an LSTM's weights sliced into gates and
/// concatenated in ONNX's gate order; a class token reaches `Concat`
/// through `Expand`), or that are concatenated with activations.
fn choose_params(
    graph: &proto::GraphProto,
    inits: &HashMap<String, aicf_onnx::Tensor>,
    pytorch: bool,
    folded_from_parameter: &HashMap<String, usize>,
) -> (HashSet<String>, HashSet<String>, HashSet<String>) {
    let mut consumers: HashMap<&str, Vec<(&proto::NodeProto, usize)>> = HashMap::new();
    // (An If's branches' nodes too: a weight only a branch reads is one.)
    for node in nodes_within(graph) {
        for (k, input) in node.input.iter().enumerate() {
            consumers.entry(input.as_str()).or_default().push((node, k));
        }
    }
    // Whether value `name` reaches a weight position, through at most
    // `depth` more value-moving ops.
    fn weight_use(
        consumers: &HashMap<&str, Vec<(&proto::NodeProto, usize)>>,
        generated: &HashSet<String>,
        one_output: &HashMap<String, String>,
        name: &str,
        (elements, arithmetic, gather): (usize, bool, bool),
        depth: usize,
    ) -> bool {
        // Whether `value` is an InstanceNormalization's output, through
        // reshapes and the exporter's scaling (`depth` ops at most).
        fn from_instance_norm(
            consumers: &HashMap<&str, Vec<(&proto::NodeProto, usize)>>,
            value: &str,
            depth: usize,
        ) -> bool {
            let producer = consumers.values().flatten().map(|(n, _)| *n).find(|n| n.output.iter().any(|o| o == value));
            match producer.map(|n| (n.op_type(), n)) {
                Some(("InstanceNormalization", _)) => true,
                Some(("Reshape" | "Unsqueeze" | "Squeeze" | "Mul", n)) if depth > 0 => {
                    n.input.iter().any(|i| from_instance_norm(consumers, i, depth - 1))
                }
                _ => false,
            }
        }
        // Whether `node` (an Add) adds to the output of a MatMul or Gemm
        // of one output feature (`one_output`) as its layer's bias: named
        // so, or added in the layer's own scope (tf2onnx's
        // `reg_1/out_1/Add` after `reg_1/out_1/MatMul`; a constant added
        // after the layer, `+ 3.0` in a scope of its own, stays one).
        let scope = |n: &str| n.rsplit_once('/').map(|(s, _)| s.to_string());
        let one_output_layer = |node: &proto::NodeProto| {
            node.input.iter().any(|i| {
                one_output.get(i).is_some_and(|layer| {
                    name.to_lowercase().trim_end_matches(":0").ends_with("bias")
                        || scope(node.name()).is_some_and(|s| !s.is_empty() && Some(&s) == scope(layer).as_ref())
                })
            })
        };
        // Whether `node` (a Mul or Add) reads an InstanceNormalization's
        // output: the exporter's affine step of a GroupNorm.
        let after_instance_norm =
            |node: &proto::NodeProto| node.input.iter().any(|i| from_instance_norm(consumers, i, 4));
        consumers.get(name).is_some_and(|uses| {
            uses.iter().any(|(node, k)| {
                let weight = match node.op_type() {
                    // The dynamo exporter writes a GroupNorm (and a
                    // non-affine InstanceNorm) as an InstanceNormalization
                    // of constant ones and zeros it names `val_<n>` (the
                    // affine weights follow as Mul and Add): not the
                    // module's parameters (trained, they drifted from
                    // PyTorch's run from the second step). So are the
                    // scale and bias of a LayerNorm or GroupNorm without
                    // learnable ones (`elementwise_affine=False`,
                    // `affine=False`), and those Mul and Add then.
                    "InstanceNormalization" | "LayerNormalization" | "RMSNormalization" | "GroupNormalization"
                        if matches!(k, 1 | 2) && generated.contains(name) =>
                    {
                        false
                    }
                    "Mul" | "Add" if generated.contains(name) && after_instance_norm(node) => false,
                    "Conv"
                    | "ConvTranspose"
                    | "LayerNormalization"
                    | "RMSNormalization"
                    | "GroupNormalization"
                    | "BatchNormalization"
                    | "InstanceNormalization" => {
                        matches!(k, 1 | 2)
                    }
                    "Gemm" => *k <= 2,
                    "MatMul" => *k <= 1,
                    // `x W` written as an einsum (`bi,oi->bo`).
                    "Einsum" => true,
                    "Gather" => gather && *k == 0,
                    // nn.PReLU's slope, one or per channel (imported as a
                    // constant, it never trained).
                    "PRelu" => *k == 1,
                    // W, R, B (and an LSTM's peepholes P).
                    "RNN" | "GRU" => matches!(k, 1..=3),
                    "LSTM" => matches!(k, 1..=3 | 7),
                    // A bias or scale added to an activation, or a token
                    // joined to them: more than one element; or the one
                    // bias of a layer of one output (a Keras regression's
                    // `Dense(1)`, which stayed a constant).
                    "Add" | "Sub" | "Mul" | "Concat" => {
                        arithmetic && (elements >= 2 || (node.op_type() == "Add" && one_output_layer(node)))
                    }
                    _ => false,
                };
                // Ops that move a weight's values, or compute the weight
                // a layer uses from them: a normalized weight (a cosine
                // classifier's `F.normalize(W)`, weight norm's `v / |v|`:
                // the numerator of a Div), a reparametrized one
                // (`log_scale.exp()`), which trained frozen before.
                let moves = matches!(
                    node.op_type(),
                    "Transpose"
                        | "Reshape"
                        | "Unsqueeze"
                        | "Squeeze"
                        | "Expand"
                        | "Identity"
                        | "Flatten"
                        | "Cast"
                        | "CastLike"
                        | "Slice"
                        | "Split"
                        | "Tile"
                        | "Div"
                        | "Exp"
                        | "Sqrt"
                        | "Neg"
                        | "Abs"
                        | "Sigmoid"
                        | "Tanh"
                        | "Softplus"
                        | "Reciprocal"
                ) && *k == 0;
                // A Loop's carried value (tf2onnx passes a Keras GRU's
                // weights through its while loop): as its body reads it.
                let carried = || {
                    (node.op_type() == "Loop" && *k >= 2)
                        .then(|| attr(node, "body").and_then(|a| a.g.as_ref()).and_then(|b| b.input.get(*k)))
                        .flatten()
                        .map(|i| i.name())
                };
                weight
                    || (moves
                        && depth > 0
                        && node.output.first().is_some_and(|o| {
                            weight_use(consumers, generated, one_output, o, (elements, arithmetic, gather), depth - 1)
                        }))
                    || (depth > 0
                        && carried().is_some_and(|i| {
                            weight_use(consumers, generated, one_output, i, (elements, arithmetic, gather), depth - 1)
                        }))
            })
        })
    }
    // In a dynamo export (its nodes carry `pkg.torch.onnx` metadata), the
    // initializers of all ones or all zeros the exporter made and named
    // `val_<n>` (a module's parameters keep their module's names), not
    // folded from a parameter (a fresh GroupNorm's weight, reshaped to
    // [C, 1, 1] and folded to a `val_<n>` of ones, is the module's: its
    // optimizer records what it folded).
    // The outputs of MatMuls and Gemms whose weight, an initializer, has
    // one output feature: the layer's bias has one value.
    let one_output: HashMap<String, String> = nodes_within(graph)
        .into_iter()
        .filter(|p| {
            let trans_b = p.attribute.iter().any(|a| a.name() == "transB" && a.i() != 0);
            let weight_dims = p.input.get(1).and_then(|w| inits.get(w.as_str())).map(|t| t.dims.clone());
            match (p.op_type(), weight_dims.as_deref()) {
                ("MatMul", Some([_, 1])) => true,
                ("Gemm", Some([1, _])) => trans_b,
                ("Gemm", Some([_, 1])) => !trans_b,
                _ => false,
            }
        })
        .filter_map(|p| Some((p.output.first()?.clone(), p.name().to_string())))
        .collect();
    let dynamo = dynamo_export(graph);
    let generated: HashSet<String> = inits
        .iter()
        .filter(|(name, t)| {
            dynamo
                && !folded_from_parameter.contains_key(*name)
                && name.strip_prefix("val_").is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
                && t.is_float()
                && {
                    let values = t.data.to_f64();
                    values.iter().all(|&v| v == 1.0) || values.iter().all(|&v| v == 0.0)
                }
        })
        .map(|(name, _)| name.clone())
        .collect();
    // A one-value initializer of PyTorch's TorchScript export under a
    // state-dict name of the model's (`alpha`, `blocks.0.gamma`; not
    // `onnx::<Op>_<n>` or a node's `/Constant_output_0`, what an exporter
    // or optimizer made, nor another tool's `add/y:0`): a learned scale or
    // gate (ReZero's alpha, a logit scale, weight norm's g at dim=None),
    // which that export records as it records a buffer; it trains where a
    // weight of more values would (it stayed a constant, silently). (A
    // dynamo export declares its scalar parameters.)
    let state_dict_name = |name: &str| {
        !name.is_empty()
            && name
                .split('.')
                .all(|part| !part.is_empty() && part.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_'))
            && !name.contains("_output_")
    };
    let named_scalar =
        |name: &str, t: &aicf_onnx::Tensor| pytorch && !dynamo && t.elements() == 1 && state_dict_name(name);
    let chosen: HashSet<String> = inits
        .iter()
        .filter(|(name, t)| t.is_float() && (!t.dims.is_empty() || named_scalar(name, t)) && !is_mask(t))
        .filter(|(name, t)| {
            let elements = if named_scalar(name, t) { 2 } else { t.elements() };
            weight_use(&consumers, &generated, &one_output, name, (elements, true, true), 8)
        })
        .map(|(name, _)| name.clone())
        .collect();
    // (Those the rule for one value chose, which no other would have.)
    let scalars = chosen
        .iter()
        .filter(|name| {
            inits.get(name.as_str()).is_some_and(|t| {
                named_scalar(name, t)
                    && (t.dims.is_empty() || !weight_use(&consumers, &generated, &one_output, name, (1, true, true), 8))
            })
        })
        .cloned()
        .collect();
    // (Those of a TorchScript export under the model's own names that train
    // only for the arithmetic with activations, or as a table of one axis
    // gathered (a diffusion schedule's `abar[t]`; an embedding's table has
    // two): a learned bias, scale or table, or a buffer, which that export
    // cannot tell apart.)
    let arithmetic = chosen
        .iter()
        .filter(|name| {
            let Some(t) = inits.get(name.as_str()) else { return false };
            pytorch
                && !dynamo
                && state_dict_name(name)
                && t.elements() >= 2
                && !weight_use(&consumers, &generated, &one_output, name, (2, false, t.dims.len() != 1), 8)
        })
        .cloned()
        .collect();
    (chosen, scalars, arithmetic)
}

/// Whether PyTorch's dynamo exporter wrote the model: its nodes carry their
/// module (`pkg.torch.onnx.name_scopes`), or, where converting the export
/// to an opset before 18 dropped the nodes' metadata, its values still
/// carry the exporter's names (`pkg.torch.onnx.original_node_name`). (Read
/// as a TorchScript export, its exporter's one-value `val_<n>`, an
/// attention's scale, trained as a learned scale.)
fn dynamo_export(graph: &proto::GraphProto) -> bool {
    graph.node.iter().any(|n| n.metadata_props.iter().any(|p| p.key() == "pkg.torch.onnx.name_scopes"))
        || dynamo_records_lost(graph)
}

/// A dynamo export without the records of which values are parameters
/// (no node names its FX node or module, no value its input kind), as
/// converting it below opset 18 leaves it.
fn dynamo_records_lost(graph: &proto::GraphProto) -> bool {
    let keys =
        |props: &[proto::StringStringEntryProto], prefix: &str| props.iter().any(|p| p.key().starts_with(prefix));
    let values = || graph.value_info.iter().chain(&graph.input);
    values().any(|v| keys(&v.metadata_props, "pkg.torch.onnx.original_node_name"))
        && !graph.node.iter().any(|n| keys(&n.metadata_props, "pkg.torch.onnx."))
        && !values().any(|v| keys(&v.metadata_props, "pkg.torch.export.graph_signature"))
        && !graph.metadata_props.iter().any(|p| p.key().starts_with("pkg.torch.export"))
}

/// The exported program's signature (graph metadata), its inputs' targets
/// and their kinds: `p_cls: PARAMETER target='cls'` gives `cls` ->
/// `PARAMETER`, also for those the exporter's folder removed. (Its `#
/// inputs` section alone: `b_proj: BUFFER target='Proj' persistent=True`;
/// the outputs' mutations name targets too.)
pub(super) fn signature_kinds(graph: &proto::GraphProto) -> HashMap<String, String> {
    graph
        .metadata_props
        .iter()
        .filter(|p| p.key() == "pkg.torch.export.ExportedProgram.graph_signature")
        .flat_map(|p| {
            p.value()
                .lines()
                .skip_while(|l| l.trim() != "# inputs")
                .skip(1)
                .take_while(|l| !l.trim_start().starts_with('#'))
                .map(str::to_string)
                .collect::<Vec<_>>()
        })
        .filter_map(|line| {
            let (_, rest) = line.split_once(": ")?;
            let (kind, target) = rest.split_once(" target=")?;
            let quote = target.chars().next().filter(|c| *c == '\'' || *c == '"')?;
            let target = target[1..].split(quote).next()?;
            Some((target.to_string(), kind.trim().to_string()))
        })
        .collect()
}

/// The initializers that PyTorch's dynamo exporter says are no parameters:
/// each node carries the FX node it came from (`pkg.torch.onnx.fx_node`,
/// `aten.sub(%conv2d, %b_m_mean)`), whose arguments name a module's
/// parameter `%p_<path>`, its buffer `%b_<path>` (a positional-encoding
/// table, a normalisation's mean: `register_buffer`, never trained), or a
/// value the graph computed and the exporter folded to a constant, named
/// as the initializer. Only values an op makes from nothing trainable
/// count as computed (`%cos` of a RoPE table, `%linspace`, `%ones`): the
/// folder also names a parameter it moved by its op (`%permute` of
/// `W.T`, `%expand` of a class token, `%exp` of a logit scale), and those
/// train. A parameter stored under another name (`val_0`: its node names
/// `%p_...`) is neither, and an initializer any reader names as a
/// parameter is one (the exporter merges equal values).
fn exporter_constants(graph: &proto::GraphProto, inits: &HashMap<String, aicf_onnx::Tensor>) -> ExporterRecord {
    // An FX argument `%name` as a whole token.
    fn names(fx: &str, token: &str) -> bool {
        fx.match_indices(token).any(|(at, _)| {
            fx[at + token.len()..].chars().next().is_none_or(|c| !(c.is_ascii_alphanumeric() || c == '_'))
        })
    }
    // FX names a node by its op, numbered from the second (`cos_1`).
    let made_from_nothing = |name: &str| {
        let base = match name.rsplit_once('_') {
            Some((b, n)) if !n.is_empty() && n.bytes().all(|c| c.is_ascii_digit()) => b,
            _ => name,
        };
        matches!(base, "cos" | "sin" | "arange" | "linspace" | "logspace" | "ones" | "zeros" | "full" | "eye")
    };
    // (FX spells a module path in lower case: a buffer `Proj` is `%b_proj`.)
    let fx_path = |name: &str| name.replace('.', "_").to_lowercase();
    let (mut constants, mut parameters) = (HashSet::new(), HashSet::new());
    let mut fx_text = String::new();
    for node in &graph.node {
        let Some(fx) = node.metadata_props.iter().find(|p| p.key() == "pkg.torch.onnx.fx_node") else { continue };
        let fx = fx.value().to_lowercase();
        fx_text.push_str(&fx);
        fx_text.push('\n');
        for input in node.input.iter().filter(|i| inits.contains_key(i.as_str())) {
            let path = fx_path(input);
            if names(&fx, &format!("%p_{path}")) {
                parameters.insert(input.clone());
            } else if names(&fx, &format!("%b_{path}")) || (made_from_nothing(input) && names(&fx, &format!("%{path}")))
            {
                constants.insert(input.clone());
            }
        }
    }
    // The exporter's own records, where it wrote them: what each input of
    // the exported program is (`InputSpec.kind`: a parameter, a buffer, a
    // constant tensor), and what a folded initializer was computed from
    // (`folded_from`: the values and initializers it folded). One folded
    // from no parameter is a constant (a RoPE table from `arange`, whatever
    // op ends it: `unsqueeze_1`, `view`, `slice_scatter_1`, which the names
    // above missed, and the tables trained); one folded from a parameter
    // (`W.T`, a class token's expand) trains.
    let records = graph.value_info.iter().chain(&graph.input).filter(|v| inits.contains_key(v.name()));
    let mut declared = HashSet::new();
    let kind_of = |v: &proto::ValueInfoProto| {
        v.metadata_props
            .iter()
            .find(|p| p.key() == "pkg.torch.export.graph_signature.InputSpec.kind")
            .map(|p| p.value().to_string())
    };
    // The exported program's signature names every input's kind and the
    // state it is (`p_cls: PARAMETER target='cls'`), those the folder
    // removed too (a class token folded into its `repeat`).
    // (Its `# inputs` section alone: `b_proj: BUFFER target='Proj'
    // persistent=True`; the outputs' mutations name targets too.)
    let signature = signature_kinds(graph);
    let declared_params: HashSet<String> = graph
        .value_info
        .iter()
        .chain(&graph.input)
        .filter(|v| kind_of(v).as_deref() == Some("PARAMETER"))
        .map(|v| v.name().to_string())
        .chain(signature.iter().filter(|(_, k)| *k == "PARAMETER").map(|(t, _)| t.clone()))
        .collect();
    // Where the export lost its records (converted below opset 18), a source
    // under a module's parameter name (`pos.weight`, `attn.in_proj_bias`)
    // is taken for the parameter it is named as: a learned position table
    // folded with its `arange` was kept constant. (And an RNN's
    // `weight_ih_l0`, `bias_hh_l1_reverse`: an LSTM's gates, reordered
    // into ONNX's, were kept constant, and only the head trained.)
    let lost = dynamo_records_lost(graph);
    let parameter_named = |source: &str| {
        let last = source.rsplit('.').next().unwrap_or(source);
        source.contains('.')
            && (matches!(last, "weight" | "bias")
                || last.ends_with("_weight")
                || last.ends_with("_bias")
                || last.starts_with("weight_")
                || last.starts_with("bias_"))
    };
    let by_records =
        |source: &str| declared_params.contains(source) || names(&fx_text, &format!("%p_{}", fx_path(source)));
    let from_parameter = |source: &str| by_records(source) || (lost && parameter_named(source));
    // Every initializer the signature names (the copies `onnx_fold::untie`
    // made of merged parameters have no value_info of their own).
    for (name, kind) in signature.iter().filter(|(n, _)| inits.contains_key(n.as_str())) {
        match kind.as_str() {
            "PARAMETER" => {
                parameters.insert(name.clone());
                declared.insert(name.clone());
            }
            "BUFFER" | "CONSTANT_TENSOR" => {
                constants.insert(name.clone());
            }
            _ => {}
        }
    }
    // A folded initializer is a constant where what it was folded from is
    // known to hold no parameter: an op that makes values from nothing
    // (`arange`) or a buffer is among its sources, and no parameter is.
    // Other sources (`val_0` alone, an earlier fold of `W.T` a second
    // optimizer run recorded so) leave it to the uses (`choose_params`).
    let known_constant = |source: &str| {
        made_from_nothing(source)
            || matches!(signature.get(source).map(String::as_str), Some("BUFFER" | "CONSTANT_TENSOR"))
    };
    let mut folded_from_parameter: HashMap<String, usize> = HashMap::new();
    let mut computed: HashMap<String, Vec<String>> = HashMap::new();
    for v in records {
        let name = v.name().to_string();
        match kind_of(v).as_deref().or(signature.get(&name).map(String::as_str)) {
            Some("PARAMETER") => {
                parameters.insert(name.clone());
                declared.insert(name.clone());
            }
            Some("BUFFER" | "CONSTANT_TENSOR") => {
                constants.insert(name.clone());
            }
            _ => {}
        }
        if let Some(sources) = super::onnx_fold::folded_from(v) {
            // (By the records alone beside a norm's running statistics: a
            // frozen batch norm, torchvision's `FrozenBatchNorm2d`, holds
            // its `weight` and `bias` as buffers too.)
            let statistics = sources.iter().any(|s| s.ends_with("running_mean") || s.ends_with("running_var"));
            let from = sources.iter().filter(|s| if statistics { by_records(s) } else { from_parameter(s) }).count();
            if from > 0 {
                folded_from_parameter.insert(name.clone(), from);
                // The folded values the exported program computed, by their
                // node names (`div_1`, `clamp_min_1`); the exporter's own
                // `val_<n>` say nothing.
                // (And the fold's own name, the last op it took: `add` of
                // Gemma's `1 + weight`, whose other source is a `val_<n>`.)
                let ops: Vec<String> = sources
                    .iter()
                    .copied()
                    .chain(std::iter::once(name.as_str()))
                    .filter(|s| !from_parameter(s) && (!inits.contains_key(*s) || *s == name))
                    .map(|s| match s.rsplit_once('_') {
                        Some((base, n)) if n.bytes().all(|b| b.is_ascii_digit()) => base,
                        _ => s,
                    })
                    // (Values made of nothing beside it, an RNN's zero
                    // state or bias half, compute nothing of it.)
                    .filter(|base| *base != "val" && !MOVING_FX_OPS.contains(base) && !FILLING_FX_OPS.contains(base))
                    .map(str::to_string)
                    .collect::<std::collections::BTreeSet<_>>()
                    .into_iter()
                    .collect();
                if !ops.is_empty() {
                    computed.insert(name.clone(), ops);
                }
                parameters.insert(name);
            } else if sources.iter().any(|s| known_constant(s)) {
                constants.insert(name);
            }
        }
    }
    constants.retain(|c| !parameters.contains(c));
    ExporterRecord { constants, declared, folded_from_parameter, computed }
}

/// The exported program's ops that make a tensor of one value.
const FILLING_FX_OPS: &[&str] =
    &["zeros", "ones", "full", "zeros_like", "ones_like", "full_like", "new_zeros", "new_ones", "new_full", "empty"];

/// The exported program's ops (fx node names, less their `_<n>`) that move
/// values and compute none: a fold of a parameter through these alone is
/// the parameter rearranged (`W.t()`, a class token's `expand`).
const MOVING_FX_OPS: &[&str] = &[
    "t",
    "transpose",
    "permute",
    "view",
    "reshape",
    "_unsafe_view",
    "expand",
    "unsqueeze",
    "squeeze",
    "repeat",
    "clone",
    "contiguous",
    "slice",
    "select",
    "_to_copy",
    "to",
    "detach",
    "alias",
    "lift_fresh_copy",
    "cat",
    "flatten",
    "split",
    "split_with_sizes",
    "getitem",
    "stack",
    "unbind",
    "chunk",
    "narrow",
    // A table read at the distinct places of an `arange` (`wpe(arange(t))`)
    // moves rows. (At a buffer's ids, which may repeat a row, a relative
    // position table's or BERT's `token_type_ids`, the fold holds copies
    // that train apart: named.)
    "arange",
];

/// What the dynamo exporter's metadata says of the initializers.
struct ExporterRecord {
    /// Initializers that are no parameters (buffers, folded constants).
    constants: HashSet<String>,
    /// Initializers the exported program declares as parameters (a scalar
    /// one too: a temperature, a logit scale, which no weight position
    /// names).
    declared: HashSet<String>,
    /// Folded initializers computed from parameters, with how many.
    folded_from_parameter: HashMap<String, usize>,
    /// Of those, the ones the exporter computed by more than moving the
    /// parameters' values (a normalized weight: `div`, `linalg_vector_norm`
    /// among what it folded), with those ops.
    computed: HashMap<String, Vec<String>>,
}

/// Whether a float initializer is a mask rather than a weight: it holds an
/// infinity or a magnitude of 1e30 or more, as an additive
/// attention mask does (`triu(full(-inf))` kept as a PyTorch buffer, or
/// `finfo.min`). No trained weight holds such values, and training one
/// would move the mask's zeros (and an infinity's gradient is NaN).
fn is_mask(t: &aicf_onnx::Tensor) -> bool {
    // (A NaN is no mask: in a weight, damage, refused on import.)
    t.is_float() && t.data.to_f64().iter().any(|v| v.is_infinite() || v.abs() >= 1e30)
}

/// The float initializers of more than one value the graph uses that are
/// neither parameters nor state: they import as constants and are not
/// trained (name, values), in the graph's order.
fn frozen_initializers(
    graph: &proto::GraphProto,
    inits: &HashMap<String, aicf_onnx::Tensor>,
    params: &HashSet<String>,
    states: &HashSet<String>,
) -> Vec<(String, usize)> {
    let mut seen = HashSet::new();
    graph
        .node
        .iter()
        .flat_map(|n| n.input.iter())
        .filter(|n| !params.contains(*n) && !states.contains(*n) && seen.insert(n.as_str()))
        .filter_map(|n| inits.get(n).filter(|t| t.is_float() && t.elements() >= 2).map(|t| (n.clone(), t.elements())))
        .collect()
}

/// An import error at `node` (the `index`-th of the graph).
/// A graph's nodes and, after each, those of its subgraphs (an If's
/// branches), depth first.
fn nodes_within(graph: &proto::GraphProto) -> Vec<&proto::NodeProto> {
    let mut all = Vec::new();
    for node in &graph.node {
        all.push(node);
        for a in &node.attribute {
            if let Some(g) = a.g.as_ref() {
                all.extend(nodes_within(g));
            }
        }
    }
    all
}

/// `model` with its subgraphs' (a Loop's body's, an If's branches') float
/// initializers moved into its graph's, where their names are the graph's
/// alone: a subgraph reads the graph's values by name, so it computes
/// the same, and a weight it holds (jax2onnx writes the weights a
/// `fori_loop` closes over into its body) is a parameter like the graph's
/// (it imported as a constant, and never trained). `None` where no
/// subgraph holds one.
fn hoist_subgraph_initializers(model: &proto::ModelProto) -> Option<proto::ModelProto> {
    fn float(t: &proto::TensorProto) -> bool {
        matches!(
            DataType::try_from(t.data_type()),
            Ok(DataType::Float | DataType::Double | DataType::Float16 | DataType::Bfloat16)
        )
    }
    let graph = model.graph.as_ref()?;
    let within = nodes_within(graph);
    let held: Vec<&proto::TensorProto> = within
        .iter()
        .flat_map(|n| n.attribute.iter().filter_map(|a| a.g.as_ref()))
        .flat_map(|g| g.initializer.iter())
        .filter(|t| float(t))
        .collect();
    if held.is_empty() {
        return None;
    }
    // Names given once in the whole model (a name two subgraphs give, or
    // the graph's own, stays where it is).
    let mut count: HashMap<&str, usize> = HashMap::new();
    for n in graph.initializer.iter().chain(
        within.iter().flat_map(|n| n.attribute.iter().filter_map(|a| a.g.as_ref()).flat_map(|g| g.initializer.iter())),
    ) {
        *count.entry(n.name()).or_default() += 1;
    }
    let outer: HashSet<&str> = graph
        .input
        .iter()
        .map(|i| i.name())
        .chain(within.iter().flat_map(|n| n.output.iter().map(String::as_str)))
        .collect();
    let movable: HashSet<String> = held
        .iter()
        .filter(|t| count.get(t.name()) == Some(&1) && !outer.contains(t.name()))
        .map(|t| t.name().to_string())
        .collect();
    if movable.is_empty() {
        return None;
    }
    fn take(graph: &mut proto::GraphProto, movable: &HashSet<String>, out: &mut Vec<proto::TensorProto>) {
        for node in &mut graph.node {
            for a in &mut node.attribute {
                if let Some(g) = a.g.as_mut() {
                    let (moved, kept): (Vec<_>, Vec<_>) =
                        std::mem::take(&mut g.initializer).into_iter().partition(|t| movable.contains(t.name()));
                    g.initializer = kept;
                    out.extend(moved);
                    take(g, movable, out);
                }
            }
        }
    }
    let mut model = model.clone();
    let graph = model.graph.as_mut()?;
    let mut moved = Vec::new();
    take(graph, &movable, &mut moved);
    graph.initializer.extend(moved);
    Some(model)
}

/// The values a node's subgraphs (an If's branches) read, the graph's
/// around them included (an over-approximation: their own too).
fn subgraph_reads(node: &NodeProto) -> Vec<&str> {
    let mut names = Vec::new();
    for a in &node.attribute {
        if let Some(b) = a.g.as_ref() {
            for n in &b.node {
                names.extend(n.input.iter().filter(|i| !i.is_empty()).map(String::as_str));
                names.extend(subgraph_reads(n));
            }
        }
    }
    names
}

fn node_error(model: &str, index: usize, node: &NodeProto, opset: i64, message: String) -> ImportError {
    ImportError::Node {
        model: model.to_string(),
        node: if node.name().is_empty() { format!("#{index}") } else { node.name().to_string() },
        // The dynamo exporter's names are generic (`node_convolution`): its
        // metadata's module says where.
        within: node
            .metadata_props
            .iter()
            .any(|p| p.key() == "pkg.torch.onnx.name_scopes")
            .then(|| super::onnx_fold::module_of(node))
            .flatten()
            .map_or(String::new(), |m| format!(" in module '{m}'")),
        op: node.op_type().to_string(),
        opset,
        message,
    }
}

/// A value during import: a traced tensor, or a constant known now.
#[derive(Clone)]
enum V {
    T(Tensor),
    C(Const),
}

/// A constant: row-major values (f64 holds every f32 and i64 below 2^53),
/// float or integer.
#[derive(Clone, Debug, PartialEq)]
struct Const {
    dims: Vec<usize>,
    vals: Vec<f64>,
    float: bool,
}

/// Whether GatherND `indices` (its last axis a whole index of `dims`) name
/// every element of `dims` once, in row-major order.
fn enumerates_in_order(indices: &Const, dims: &[usize]) -> bool {
    let k = dims.len();
    let count: usize = dims.iter().product();
    if indices.dims.last() != Some(&k) || k == 0 || indices.vals.len() != count * k {
        return false;
    }
    let mut at = vec![0usize; k];
    for index in indices.vals.chunks(k) {
        if index.iter().zip(&at).any(|(&v, &a)| v != a as f64) {
            return false;
        }
        // The next position, the last axis fastest.
        for d in (0..k).rev() {
            at[d] += 1;
            if at[d] < dims[d] {
                break;
            }
            at[d] = 0;
        }
    }
    true
}

/// `c`'s first row, where `c` meets a computed `x` of its rank and rows
/// along its first axis (two or more) and its rows are all alike: the
/// same values broadcast, at any number of rows (a mask the export built
/// for its batch fixed the model's; see `hl-set-batch`).
fn one_row(c: &Const, x: &Tensor) -> Option<Const> {
    let rows = *c.dims.first()?;
    if rows < 2 || c.dims.len() != x.rank() || x.shape().first() != Some(&rows) || c.vals.is_empty() {
        return None;
    }
    let row = c.vals.len() / rows;
    let first = &c.vals[..row];
    if !c.vals.chunks(row).all(|r| r.iter().zip(first).all(|(a, b)| a.to_bits() == b.to_bits())) {
        return None;
    }
    let mut dims = c.dims.clone();
    dims[0] = 1;
    Some(Const { dims, vals: first.to_vec(), float: c.float })
}

impl Const {
    fn from_onnx(t: &aicf_onnx::Tensor) -> Const {
        Const { dims: t.dims.clone(), vals: t.data.to_f64(), float: t.is_float() }
    }
    fn ints(v: &[i64]) -> Const {
        Const { dims: vec![v.len()], vals: v.iter().map(|&x| x as f64).collect(), float: false }
    }
    fn scalar(v: f64, float: bool) -> Const {
        Const { dims: vec![], vals: vec![v], float }
    }
    fn as_ints(&self) -> Vec<i64> {
        self.vals.iter().map(|&v| v as i64).collect()
    }
}

type R<T> = Result<T, String>;

struct Importer<'a> {
    name: String,
    opset: i64,
    graph: &'a proto::GraphProto,
    inits: &'a HashMap<String, aicf_onnx::Tensor>,
    params: &'a HashSet<String>,
    states: &'a HashSet<String>,
    /// The model's directory: where a tensor attribute's external data is.
    base: &'a Path,
    /// ONNX initializer name -> `hl.param` / `hl.state` name.
    names: HashMap<String, String>,
    /// Imported with a loss, to train (not `--loss none`, forward only).
    trains: bool,
    /// Each If traced, by its name, and whether it took its then branch.
    branches: Vec<(String, String)>,
    /// Identity outputs that are initializers of their own (a fresh norm's
    /// running statistics): their Identity nodes are not traced.
    aliased: &'a HashSet<String>,
    /// Parameters read broadcast to these shapes (a class token the
    /// exporter folded into its copies over the batch).
    broadcast: &'a HashMap<String, Vec<usize>>,
    /// Every graph input's spec, by name.
    input_specs: Vec<(String, TensorSpec)>,
    /// Whether a function read an input it does not take for its shape
    /// (through zeros that canonicalization removes).
    shape_placeholders: bool,
    /// Sequences (`SplitToSequence`'s), by name: their tensors.
    sequences: HashMap<String, Vec<V>>,
    /// Embedding tables PyTorch declared with a padding index (a dynamo
    /// export's record), by initializer: the row whose gradient is zero.
    padding: HashMap<String, i64>,
    /// The batch size `--batch` bound to a symbolic dimension, if any.
    bound_batch: Option<usize>,
    /// Values (by name) of the function being traced that fold the bound
    /// batch size: a Shape of a tensor of batch rows (`true`: its element
    /// 0 is the batch), or the size itself (`x.size(0)`, `false`), with the
    /// tensor it is read from. Where such a size meets a computed tensor in
    /// arithmetic (`loss.sum() / x.size(0)`), it is computed from that
    /// tensor's rows, so that a smaller batch (`--batch`, an epoch's last)
    /// divides by its own size, not the bound one.
    batch_sizes: HashMap<String, (Tensor, bool)>,
    /// The tensor each Flatten or Reshape output was made from: a Gather
    /// of every element in order from it is that tensor reshaped.
    reshaped_from: HashMap<String, Tensor>,
    /// The input of a `Softmax` over the last axis whose output is the
    /// graph's first output (a Keras classifier's probabilities): the
    /// logits a cross-entropy loss takes.
    softmax_logits: Option<Tensor>,
    /// Whether tf2onnx wrote the model (a Keras model's layers).
    tf2onnx: bool,
    /// [`ImportOptions::legacy_names`].
    legacy_names: bool,
    /// Scan outputs of loops that ran no iteration (empty: an error where
    /// the graph reads one).
    empty_scans: HashSet<String>,
    /// [`Imported::inference_dropouts`].
    /// (In a cell: the node's translation holds the importer shared.)
    inference_dropouts: std::cell::RefCell<std::collections::BTreeSet<String>>,
    /// [`Imported::seeded_random`].
    seeded_random: std::cell::RefCell<std::collections::BTreeSet<String>>,
    /// Whether PyTorch wrote the model: a training BatchNorm's running
    /// variance takes the batch's unbiased variance, as PyTorch's does;
    /// the ONNX spec's, Keras's and Flax's take the biased one.
    pytorch: bool,
}

/// How many inputs an op takes, least and most (over the opsets the
/// importer reads: `Clip`'s bounds and `Reshape`'s shape became inputs).
fn arity(op: &str) -> (usize, usize) {
    match op {
        "Constant" => (0, 0),
        "Range" | "Where" | "ScatterND" | "ScatterElements" | "OneHot" => (3, 3),
        "BatchNormalization" => (5, 5),
        "Add" | "Sub" | "Mul" | "Div" | "Pow" | "Mod" | "Equal" | "Less" | "Greater" | "LessOrEqual"
        | "GreaterOrEqual" | "And" | "Or" | "Xor" | "Expand" | "Gather" | "GatherElements" | "GatherND" | "MatMul"
        | "PRelu" | "CumSum" | "Tile" | "TopK" | "CastLike" | "ReverseSequence" => (2, 2),
        "Conv" | "ConvTranspose" | "Gemm" | "SoftmaxCrossEntropyLoss" | "NegativeLogLikelihoodLoss" => (2, 3),
        "SequenceAt" => (2, 2),
        "SplitToSequence" => (1, 2),
        "LayerNormalization" => (2, 3),
        "RMSNormalization" => (2, 2),
        "Attention" => (3, 7),
        "RotaryEmbedding" => (3, 4),
        "InstanceNormalization" | "GroupNormalization" => (3, 3),
        "Resize" => (1, 4),
        "Max" | "Min" | "Concat" | "Einsum" | "Loop" => (1, usize::MAX),
        "Clip" | "Dropout" => (1, 3),
        "RandomNormal" | "RandomUniform" => (0, 0),
        "Pad" => (1, 4),
        "Slice" => (1, 5),
        "RNN" | "GRU" => (3, 6),
        "LSTM" => (3, 8),
        "Reshape" | "ReduceMean" | "ReduceSum" | "ReduceMax" | "ReduceMin" | "ReduceLogSumExp" | "ReduceL1"
        | "ReduceL2" | "ReduceSumSquare" | "ReduceProd" | "Split" | "Squeeze" | "Unsqueeze" | "Trilu" => (1, 2),
        _ => (1, 1),
    }
}

/// The type an attribute of this name has in every op of the default
/// domain the importer reads, where its name fixes it.
fn attribute_type(name: &str) -> Option<AttributeType> {
    Some(match name {
        "axis"
        | "transA"
        | "transB"
        | "keepdims"
        | "group"
        | "to"
        | "start"
        | "end"
        | "ceil_mode"
        | "count_include_pad"
        | "noop_with_empty_axes"
        | "stash_type"
        | "training_mode"
        | "upper"
        | "spatial"
        | "allowzero"
        | "num_outputs"
        | "fmod"
        | "hidden_size"
        | "input_forget"
        | "layout"
        | "linear_before_reset"
        | "exclusive"
        | "reverse"
        | "batch_dims"
        | "batch_axis"
        | "time_axis"
        | "blocksize"
        | "largest"
        | "sorted"
        | "ignore_index"
        | "num_groups"
        | "q_num_heads"
        | "kv_num_heads"
        | "is_causal"
        | "qk_matmul_output_mode"
        | "softmax_precision"
        | "left_window_size"
        | "right_window_size"
        | "num_heads"
        | "rotary_embedding_dim"
        | "interleaved"
        | "dtype" => AttributeType::Int,
        "axes" | "perm" | "kernel_shape" | "strides" | "pads" | "dilations" | "split" | "starts" | "ends" | "shape" => {
            AttributeType::Ints
        }
        "epsilon" | "alpha" | "beta" | "momentum" | "min" | "max" | "ratio" | "gamma" | "cubic_coeff_a" | "mean"
        | "scale" | "low" | "high" | "softcap" => AttributeType::Float,
        "auto_pad" | "approximate" | "mode" | "direction" | "equation" | "reduction" => AttributeType::String,
        "activations" => AttributeType::Strings,
        _ => return None,
    })
}

/// A node's inputs and attributes against its op's schema: input count,
/// each known attribute's type, the required ones present. An invalid
/// graph is refused, not read with defaults.
fn check_node(node: &NodeProto) -> R<()> {
    let op = node.op_type();
    // Trailing empty names are absent optional inputs.
    let given = node.input.iter().rposition(|n| !n.is_empty()).map_or(0, |i| i + 1);
    let (least, most) = arity(op);
    if given < least || given > most {
        let want = match (least, most) {
            (a, b) if a == b => format!("{a}"),
            (a, usize::MAX) => format!("at least {a}"),
            (a, b) => format!("{a} to {b}"),
        };
        return Err(format!("{given} inputs; {op} takes {want}"));
    }
    for a in &node.attribute {
        let declared = a.r#type();
        if let Some(want) = attribute_type(a.name())
            && declared != AttributeType::Undefined
            && declared != want
        {
            return Err(format!(
                "attribute '{}' is {}; {op} takes it as {}",
                a.name(),
                declared.as_str_name(),
                want.as_str_name()
            ));
        }
        // A float attribute is a finite number (Clip's bounds may be
        // infinite: no bound), never NaN.
        if attribute_type(a.name()) == Some(AttributeType::Float) {
            let v = a.f();
            if v.is_nan() || (v.is_infinite() && !(op == "Clip" && matches!(a.name(), "min" | "max"))) {
                return Err(format!("attribute '{}' is {v}; {op} takes a finite number", a.name()));
            }
        }
    }
    let required: &[&str] = match op {
        "Concat" => &["axis"],
        "Cast" => &["to"],
        "DepthToSpace" | "SpaceToDepth" => &["blocksize"],
        "Einsum" => &["equation"],
        "RNN" | "GRU" | "LSTM" => &["hidden_size"],
        _ => &[],
    };
    if let Some(missing) = required.iter().find(|r| attr(node, r).is_none()) {
        return Err(format!("{op} needs the attribute '{missing}'"));
    }
    Ok(())
}

/// What a Resize asks for besides its sizes.
struct ResizeAsk<'a> {
    mode: &'a str,
    transform: &'a str,
    rounding: &'a str,
    cubic_a: f64,
    exclude: bool,
}

/// The `[m, n]` matrix that resizes an axis of `n` elements to `m` (`scale`
/// the factor the coordinates divide by) as ONNX's Resize defines it: each
/// output's source coordinate by the coordinate transformation, its
/// neighbours `i0 = ceil(x) - 1`, `i0 + 1` (and `i0 - 1`, `i0 + 2` for
/// cubic) weighted by the mode's coefficients of `x - i0` in (0, 1], edge
/// elements repeated past the ends (or, with `exclude`, dropped and the
/// weights renormalised).
fn resize_matrix(n: usize, m: usize, scale: f64, ask: &ResizeAsk<'_>) -> R<Vec<f64>> {
    let length = scale * n as f64;
    let mut w = vec![0.0; m * n];
    for o in 0..m {
        let x = o as f64;
        let src = match ask.transform {
            "half_pixel" => (x + 0.5) / scale - 0.5,
            "pytorch_half_pixel" if length == 1.0 => -0.5,
            "pytorch_half_pixel" => (x + 0.5) / scale - 0.5,
            "align_corners" if length == 1.0 => 0.0,
            "align_corners" => x * (n as f64 - 1.0) / (length - 1.0),
            "asymmetric" => x / scale,
            "half_pixel_symmetric" => {
                let offset = n as f64 / 2.0 * (1.0 - m as f64 / length);
                offset + (x + 0.5) / scale - 0.5
            }
            other => return Err(format!("coordinate_transformation_mode '{other}' is not supported")),
        };
        let i0 = src.ceil() as i64 - 1;
        let ratio = src - i0 as f64;
        let (first, coeffs): (i64, Vec<f64>) = match ask.mode {
            "nearest" => {
                let right = match ask.rounding {
                    _ if ratio == 1.0 => true,
                    "round_prefer_floor" => ratio > 0.5,
                    "round_prefer_ceil" => ratio >= 0.5,
                    "floor" => false,
                    "ceil" => true,
                    other => return Err(format!("nearest_mode '{other}' is not supported")),
                };
                (i0, if right { vec![0.0, 1.0] } else { vec![1.0, 0.0] })
            }
            "linear" => (i0, vec![1.0 - ratio, ratio]),
            "cubic" => {
                let a = ask.cubic_a;
                let (r, s) = (ratio, 1.0 - ratio);
                (
                    i0 - 1,
                    vec![
                        ((a * (r + 1.0) - 5.0 * a) * (r + 1.0) + 8.0 * a) * (r + 1.0) - 4.0 * a,
                        ((a + 2.0) * r - (a + 3.0)) * r * r + 1.0,
                        ((a + 2.0) * s - (a + 3.0)) * s * s + 1.0,
                        ((a * (s + 1.0) - 5.0 * a) * (s + 1.0) + 8.0 * a) * (s + 1.0) - 4.0 * a,
                    ],
                )
            }
            other => return Err(format!("mode '{other}' is not supported (nearest, linear or cubic)")),
        };
        let inside = |i: i64| (0..n as i64).contains(&i);
        let total: f64 = if ask.exclude {
            coeffs.iter().enumerate().filter(|(k, _)| inside(first + *k as i64)).map(|(_, c)| c).sum()
        } else {
            1.0
        };
        for (k, c) in coeffs.iter().enumerate() {
            let i = first + k as i64;
            if ask.exclude && !inside(i) {
                continue;
            }
            let at = i.clamp(0, n as i64 - 1) as usize;
            w[o * n + at] += if ask.exclude { c / total } else { *c };
        }
    }
    Ok(w)
}

/// `x` resized along `axis` to `m` elements: the axis moved last, a linear
/// layer whose constant weight is the interpolation matrix
/// ([`resize_matrix`]), and moved back. Nothing where the matrix is the
/// identity.
fn resize_axis(g: &Graph, x: &Tensor, axis: usize, m: usize, scale: f64, ask: &ResizeAsk<'_>) -> R<Tensor> {
    let n = x.shape()[axis];
    if axis < 2 && (m != n || scale != 1.0) {
        return Err(format!("resizing axis {axis} (the batch or the channels) is not supported"));
    }
    if n == 0 || m == 0 {
        return Err(format!("resizing axis {axis} of {n} elements to {m}"));
    }
    if n.saturating_mul(m) > 1 << 24 {
        return Err(format!("resizing axis {axis} from {n} to {m} elements takes a matrix past 2^24 entries"));
    }
    let w = resize_matrix(n, m, scale, ask)?;
    let identity = m == n && (0..m).all(|o| (0..n).all(|i| w[o * n + i] == if o == i { 1.0 } else { 0.0 }));
    if identity {
        return Ok(x.clone());
    }
    let rank = x.rank();
    // x W^T over the last axis: a linear layer of constant weights.
    let w = nn(g.constant(&w, &TensorSpec::new([m, n], x.dtype())))?;
    if axis + 1 == rank {
        return nn(x.linear(&w, None));
    }
    let mut to_last: Vec<i64> = (0..rank as i64).filter(|&d| d != axis as i64).collect();
    to_last.push(axis as i64);
    let mut back = vec![0i64; rank];
    for (k, &d) in to_last.iter().enumerate() {
        back[d as usize] = k as i64;
    }
    nn(x.permute(&to_last).and_then(|v| v.linear(&w, None)).and_then(|v| v.permute(&back)))
}

/// `x` padded along `axis` by `before` and `after` elements (a negative
/// count crops) in ONNX Pad's `mode`: `constant` (`value`), `reflect` (the
/// mirror image, the edge not repeated), `edge` (the edge repeated) or
/// `wrap` (the other end's elements).
fn pad_axis(g: &Graph, x: &Tensor, axis: usize, (before, after): (i64, i64), mode: &str, value: f64) -> R<Tensor> {
    let d = x.shape()[axis] as i64;
    // Crops first: what is left is then padded.
    let (lo, hi) = (before.saturating_neg().max(0), d.saturating_sub(after.saturating_neg().max(0)));
    if hi < lo {
        return Err(format!("pads {before} and {after} crop more than axis {axis}'s {d} elements"));
    }
    let mut x = x.clone();
    if lo > 0 || hi < d {
        x = nn(x.narrow(axis as i64, lo as usize, (hi - lo) as usize))?;
    }
    let (before, after) = (before.max(0) as usize, after.max(0) as usize);
    if before == 0 && after == 0 {
        return Ok(x);
    }
    // The other axes' elements times the padded axis's (an empty axis
    // must not hide the others).
    let others =
        x.shape().iter().enumerate().filter(|(k, _)| *k != axis).try_fold(1usize, |n, (_, &s)| n.checked_mul(s));
    let padded = (x.shape()[axis].checked_add(before)).and_then(|s| s.checked_add(after));
    let total = padded.zip(others).and_then(|(p, e)| e.checked_mul(p));
    if total.is_none_or(|t| t > 1 << 40) {
        return Err(format!("pads {before} and {after} of axis {axis} make a tensor of more than 2^40 elements"));
    }
    let d = x.shape()[axis];
    let one_at = |i: usize| nn(x.narrow(axis as i64, i, 1));
    let (front, back): (Vec<Tensor>, Vec<Tensor>) = match mode {
        "constant" => {
            let block = |n: usize| -> R<Vec<Tensor>> {
                if n == 0 {
                    return Ok(vec![]);
                }
                let mut shape = x.shape().to_vec();
                shape[axis] = n;
                Ok(vec![nn(g.constant(&[value], &TensorSpec::new(shape, x.dtype())))?])
            };
            (block(before)?, block(after)?)
        }
        "reflect" => {
            if before >= d || after >= d {
                return Err(format!("reflect pads {before} and {after} need more than axis {axis}'s {d} elements"));
            }
            (
                (1..=before).rev().map(one_at).collect::<R<_>>()?,
                (1..=after).map(|i| one_at(d - 1 - i)).collect::<R<_>>()?,
            )
        }
        "edge" => {
            if d == 0 {
                return Err(format!("edge pads of an empty axis {axis}"));
            }
            let repeated = |i: usize, n: usize| -> R<Vec<Tensor>> {
                if n == 0 {
                    return Ok(vec![]);
                }
                let mut shape = x.shape().to_vec();
                shape[axis] = n;
                Ok(vec![nn(one_at(i)?.broadcast_to(&shape))?])
            };
            (repeated(0, before)?, repeated(d - 1, after)?)
        }
        "wrap" => {
            if before > d || after > d {
                return Err(format!(
                    "wrap pads {before} and {after} need at least as many of axis {axis}'s {d} elements"
                ));
            }
            let tail = if before > 0 { vec![nn(x.narrow(axis as i64, d - before, before))?] } else { vec![] };
            let head = if after > 0 { vec![nn(x.narrow(axis as i64, 0, after))?] } else { vec![] };
            (tail, head)
        }
        other => return Err(format!("mode '{other}' (Pad takes constant, reflect, edge or wrap)")),
    };
    let parts: Vec<&Tensor> =
        front.iter().chain(std::iter::once(&x)).chain(back.iter()).filter(|t| t.shape()[axis] > 0).collect();
    nn(Tensor::concat(&parts, axis as i64))
}

fn attr<'n>(node: &'n NodeProto, name: &str) -> Option<&'n AttributeProto> {
    node.attribute.iter().find(|a| a.name() == name)
}
/// Whether an ONNX element type is a float (the importer reads each as
/// f32).
fn is_float_type(d: DataType) -> bool {
    matches!(d, DataType::Float | DataType::Double | DataType::Float16 | DataType::Bfloat16)
}

fn attr_i(node: &NodeProto, name: &str, default: i64) -> i64 {
    attr(node, name).map(|a| a.i()).unwrap_or(default)
}
fn attr_f(node: &NodeProto, name: &str, default: f32) -> f32 {
    attr(node, name).map(|a| a.f()).unwrap_or(default)
}
/// A normalisation's `epsilon` (default 1e-5): a finite number, not
/// negative (NaN reached the IR printer as `NaN : f64`).
fn epsilon(node: &NodeProto) -> Result<f64, String> {
    let eps = attr_f(node, "epsilon", 1e-5) as f64;
    if !eps.is_finite() || eps < 0.0 {
        return Err(format!("epsilon {eps} must be a finite number, at least 0"));
    }
    Ok(eps)
}
fn attr_ints(node: &NodeProto, name: &str) -> Option<Vec<i64>> {
    attr(node, name).map(|a| a.ints.clone())
}
fn attr_s(node: &NodeProto, name: &str) -> Option<String> {
    attr(node, name).map(|a| String::from_utf8_lossy(a.s()).into_owned())
}

/// The `label_smoothing` of the PyTorch call a dynamo export's
/// SoftmaxCrossEntropyLoss came from (`aten.cross_entropy_loss(self,
/// target, weight, reduction, ignore_index, label_smoothing)` in its
/// `pkg.torch.onnx.fx_node`): 0 where it records none.
fn label_smoothing(node: &NodeProto) -> Result<f64, String> {
    let Some(fx) = node.metadata_props.iter().find(|p| p.key() == "pkg.torch.onnx.fx_node").map(|p| p.value()) else {
        return Ok(0.0);
    };
    let Some(call) = fx.split("aten.cross_entropy_loss.default](").nth(1) else { return Ok(0.0) };
    let kwarg = call
        .split("kwargs = {")
        .nth(1)
        .and_then(|k| k.split("label_smoothing:").nth(1))
        .and_then(|v| v.split([',', '}']).next());
    let positional = call.strip_prefix("args = (").and_then(|a| a.split(')').next()).and_then(|a| a.split(',').nth(5));
    let Some(text) = kwarg.or(positional) else { return Ok(0.0) };
    let ls: f64 = text
        .trim()
        .parse()
        .map_err(|_| format!("label_smoothing '{}' in its metadata is not a number", text.trim()))?;
    if !(0.0..=1.0).contains(&ls) {
        return Err(format!("label_smoothing {ls} (its metadata) is not in [0, 1]"));
    }
    Ok(ls)
}

/// The negative log-likelihood of log-probabilities `log_p` `[..., C]`
/// (classes last) at `labels` `[...]`, as PyTorch's `nll_loss` (and its
/// `cross_entropy` of log-softmaxed scores): each position's `-w[y]
/// log_p[y]`, 0 where the label is `ignore`; with `smoothing`, `(1 - s)`
/// of that and `s` of the mean over the classes of `-w[c] log_p[c]`; a mean
/// divides by the labels' summed weights (their count unweighted).
fn nll_loss(
    log_p: &Tensor,
    labels: &Tensor,
    weight: Option<&Tensor>,
    reduction: Reduction,
    ignore: Option<i64>,
    smoothing: f64,
) -> nn::Result<Tensor> {
    let classes = log_p.shape()[log_p.rank() - 1];
    let mut column: Vec<i64> = labels.shape().iter().map(|&d| d as i64).collect();
    column.push(1);
    let ids = log_p.graph().arange(classes)?;
    let ids = if labels.dtype() == DType::I32 { ids } else { ids.cast(labels.dtype())? };
    let hit = labels.reshape(&column)?.compare(Compare::Eq, &ids)?;
    let zero = log_p.scalar(0.0)?;
    let weights = weight.map(|w| w.broadcast_to(log_p.shape())).transpose()?;
    let nll = Tensor::select(&hit, log_p, &zero)?.sum(&[-1], false)?.neg()?;
    let (mut each, mut counted) = match &weights {
        Some(w) => {
            let wy = Tensor::select(&hit, w, &zero)?.sum(&[-1], false)?;
            (nll.mul(&wy)?, wy)
        }
        None => (nll.clone(), nll.scalar(1.0)?.broadcast_to(nll.shape())?),
    };
    if smoothing > 0.0 {
        let spread = match &weights {
            Some(w) => log_p.mul(w)?.sum(&[-1], false)?,
            None => log_p.sum(&[-1], false)?,
        };
        let uniform = spread.neg()?.mul_scalar(1.0 / classes as f64)?;
        each = each.mul_scalar(1.0 - smoothing)?.add(&uniform.mul_scalar(smoothing)?)?;
    }
    if let Some(i) = ignore {
        let ignored = labels.compare(Compare::Eq, &labels.scalar(i as f64)?)?;
        let zero = each.scalar(0.0)?;
        each = Tensor::select(&ignored, &zero, &each)?;
        counted = Tensor::select(&ignored, &zero, &counted)?;
    }
    let all: Vec<i64> = (0..each.rank() as i64).collect();
    let total = |t: &Tensor| if all.is_empty() { Ok(t.clone()) } else { t.sum(&all, false) };
    match reduction {
        Reduction::None => Ok(each),
        Reduction::Sum => total(&each),
        Reduction::Mean => total(&each)?.div(&total(&counted)?),
    }
}

/// A parameter's name: characters outside `[A-Za-z0-9_.]` become `_` (a
/// TensorFlow tensor's `dense/kernel:0`); a leading digit stays.
fn param_name(onnx: &str, legacy: bool) -> String {
    let mut s: String =
        onnx.chars().map(|c| if c.is_ascii_alphanumeric() || c == '_' || c == '.' { c } else { '_' }).collect();
    s = s.trim_matches('.').to_string();
    // (A name that starts with a digit, `nn.Sequential`'s `0.weight`,
    // stays as PyTorch's `state_dict` has it: a quoted symbol in the IR.
    // It was `p0.weight`, which a checkpoint loaded back into the module
    // with `strict=False` skipped without a word.)
    if s.is_empty() || (legacy && s.starts_with(|c: char| c.is_ascii_digit())) {
        s = format!("p{s}");
    }
    s
}

fn norm_axis(axis: i64, rank: usize) -> R<usize> {
    let a = if axis < 0 { axis + rank as i64 } else { axis };
    if a < 0 || a >= rank as i64 {
        return Err(format!("axis {axis} is out of range for rank {rank}"));
    }
    Ok(a as usize)
}

/// The element count of a constant's shape, refusing one too large to fold.
fn numel(dims: &[usize]) -> R<usize> {
    dims.iter()
        .try_fold(1usize, |n, &d| n.checked_mul(d))
        .filter(|&n| n <= aicf_onnx::MAX_ELEMENTS)
        .ok_or_else(|| format!("a constant of shape {dims:?} is too large to fold"))
}

/// The first value of a constant that must hold one.
fn first(c: &Const, what: &str) -> R<f64> {
    c.vals.first().copied().ok_or_else(|| format!("{what} is empty"))
}

/// An Attention mask as the bias it adds to the scores (a boolean's
/// False -inf and True 0, a float's values), its last axis padded to
/// `keys` (-inf beyond a shorter mask, as ONNX pads it).
fn mask_bias(c: &Const, keys: usize) -> R<(Vec<usize>, Vec<f64>)> {
    let last = match c.dims.last() {
        Some(&n) if n >= 1 && n <= keys => n,
        _ => return Err(format!("the mask {:?} does not end in 1 to {keys} keys", c.dims)),
    };
    let mut dims = c.dims.clone();
    if let Some(d) = dims.last_mut() {
        *d = keys;
    }
    let mut vals = Vec::with_capacity(numel(&dims)?);
    for row in c.vals.chunks(last) {
        vals.extend(row.iter().map(|&m| match (c.float, m != 0.0) {
            (true, _) => m,
            (false, true) => 0.0,
            (false, false) => f64::NEG_INFINITY,
        }));
        vals.extend(std::iter::repeat_n(f64::NEG_INFINITY, keys - last));
    }
    Ok((dims, vals))
}

/// numpy's maximum and minimum: NaN where either is (f64's drop it).
fn nan_max(x: f64, y: f64) -> f64 {
    if x.is_nan() || y.is_nan() { f64::NAN } else { x.max(y) }
}
fn nan_min(x: f64, y: f64) -> f64 {
    if x.is_nan() || y.is_nan() { f64::NAN } else { x.min(y) }
}

/// Numpy broadcasting of two shapes.
fn broadcast(a: &[usize], b: &[usize]) -> R<Vec<usize>> {
    let n = a.len().max(b.len());
    let mut out = vec![0; n];
    for i in 0..n {
        let x = if i + a.len() >= n { a[i + a.len() - n] } else { 1 };
        let y = if i + b.len() >= n { b[i + b.len() - n] } else { 1 };
        out[i] = if x == y || y == 1 {
            x
        } else if x == 1 {
            y
        } else {
            return Err(format!("shapes {a:?} and {b:?} do not broadcast"));
        };
    }
    Ok(out)
}

/// The row-major index into `shape` of output index `idx` (of `out`), with
/// broadcasting.
fn broadcast_index(idx: usize, out: &[usize], shape: &[usize]) -> usize {
    let mut rem = idx;
    let mut offset = 0;
    let mut stride = 1;
    let mut coords = vec![0; out.len()];
    for i in (0..out.len()).rev() {
        coords[i] = rem % out[i];
        rem /= out[i];
    }
    for (i, &d) in shape.iter().enumerate().rev() {
        let c = coords[i + out.len() - shape.len()];
        offset += if d == 1 { 0 } else { c * stride };
        stride *= d;
    }
    offset
}

fn fold_binary(a: &Const, b: &Const, f: impl Fn(f64, f64) -> f64) -> R<Const> {
    let dims = broadcast(&a.dims, &b.dims)?;
    let n = numel(&dims)?;
    let vals = (0..n)
        .map(|i| f(a.vals[broadcast_index(i, &dims, &a.dims)], b.vals[broadcast_index(i, &dims, &b.dims)]))
        .collect();
    Ok(Const { dims, vals, float: a.float || b.float })
}

impl Importer<'_> {
    /// Whether no node reads value `name` and the graph does not return it
    /// (an optional output left out, or written and never used).
    fn unused(&self, name: &str) -> bool {
        name.is_empty()
            || !(self.graph.node.iter().any(|n| n.input.iter().any(|i| i == name))
                || self.graph.output.iter().any(|o| o.name() == name))
    }

    /// ONNX's Attention (opsets 23 to 25): `softmax(q k^T * scale [+
    /// bias]) v` over Q, K and V of `[B, heads, S, D]` (or `[B, S, heads *
    /// D]` with `q_num_heads` and `kv_num_heads`), grouped-query
    /// attention's key and value heads each read by `q_num_heads /
    /// kv_num_heads` query heads in turn (numpy's `repeat`), a key/value
    /// cache (past_key, past_value) before the keys. Without a mask, a
    /// softcap, a window, a cache under `is_causal` or the scores output
    /// it is `hl.attention`, whose gradient is one fused kernel; otherwise
    /// the scores, their softcap, the additive bias (a boolean mask's
    /// False -inf; the causal mask and the sliding window aligned after
    /// the cache) and the softmax, where a query row with no key to attend
    /// gives zeros, as ONNX defines, not NaN. A static cache's lengths
    /// (nonpad_kv_seqlen, opset 24) are refused.
    fn attention(&self, g: &Graph, node: &NodeProto, ins: &[Option<V>]) -> R<Vec<V>> {
        let given = |k: usize| ins.get(k).and_then(|v| v.as_ref());
        let tensor = |k: usize| -> R<Tensor> {
            let v = given(k).ok_or_else(|| format!("input {k} is missing"))?;
            self.tensor(g, v, Some(DType::F32))
        };
        let (q, k, v) = (tensor(0)?, tensor(1)?, tensor(2)?);
        if given(4).is_some() != given(5).is_some() {
            return Err("past_key and past_value come together or not at all".into());
        }
        if given(6).is_some() {
            return Err("nonpad_kv_seqlen (a static key/value cache's lengths) is not supported".into());
        }
        let scores_out = node.output.get(3).is_some_and(|o| !self.unused(o));
        let mode = attr_i(node, "qk_matmul_output_mode", 0);
        if !(0..=3).contains(&mode) {
            return Err(format!("qk_matmul_output_mode {mode} is not one of 0 to 3"));
        }
        let (left, right) = (attr_i(node, "left_window_size", -1), attr_i(node, "right_window_size", -1));
        if left < -1 || right < -1 {
            return Err(format!("a window of {left} left and {right} right (each -1, unbounded, or at least 0)"));
        }
        let rank = q.rank();
        if !matches!(rank, 3 | 4) || k.rank() != rank || v.rank() != rank {
            return Err(format!(
                "Q {}, K {} and V {} must all be of rank 4 ([batch, heads, sequence, head size]) or 3 \
                 ([batch, sequence, hidden])",
                q.spec(),
                k.spec(),
                v.spec()
            ));
        }
        // Each to [B, heads, S, D].
        let heads = |x: &Tensor, n: i64, what: &str| -> R<Tensor> {
            let s = x.shape();
            if n < 1 || s[2] as i64 % n != 0 {
                return Err(format!("{what} {} does not split into {n} heads", x.spec()));
            }
            nn(x.reshape(&[s[0] as i64, s[1] as i64, n, s[2] as i64 / n]).and_then(|y| y.permute(&[0, 2, 1, 3])))
        };
        let (q, k, v) = if rank == 3 {
            let (Some(qh), Some(kvh)) = (attr(node, "q_num_heads"), attr(node, "kv_num_heads")) else {
                return Err("3-D Q, K and V need the attributes q_num_heads and kv_num_heads".into());
            };
            (heads(&q, qh.i(), "Q")?, heads(&k, kvh.i(), "K")?, heads(&v, kvh.i(), "V")?)
        } else {
            (q, k, v)
        };
        // The cache's keys and values before the new ones.
        let (k, v, past) = match (given(4), given(5)) {
            (Some(_), Some(_)) => {
                let (pk, pv) = (tensor(4)?, tensor(5)?);
                let fits = |p: &Tensor, x: &Tensor| {
                    p.rank() == 4 && p.shape()[..2] == x.shape()[..2] && p.shape()[3] == x.shape()[3]
                };
                if !fits(&pk, &k) || !fits(&pv, &v) || pk.shape()[2] != pv.shape()[2] {
                    return Err(format!(
                        "past_key {} and past_value {} do not fit K {} and V {}",
                        pk.spec(),
                        pv.spec(),
                        k.spec(),
                        v.spec()
                    ));
                }
                let past = pk.shape()[2];
                (nn(Tensor::concat(&[&pk, &k], 2))?, nn(Tensor::concat(&[&pv, &v], 2))?, past)
            }
            _ => (k, v, 0),
        };
        let (qs, ks, vs) = (q.shape().to_vec(), k.shape().to_vec(), v.shape().to_vec());
        let (batch, q_heads, kv_heads) = (qs[0], qs[1], ks[1]);
        if ks[0] != batch || vs[0] != batch || vs[1] != kv_heads || ks[3] != qs[3] || vs[2] != ks[2] {
            return Err(format!(
                "Q {}, K {} and V {} do not fit: the batch agrees, K and V have the same heads and sequence, \
                 Q and K the same head size",
                q.spec(),
                k.spec(),
                v.spec()
            ));
        }
        if kv_heads == 0 || q_heads % kv_heads != 0 {
            return Err(format!("{q_heads} query heads are not a multiple of {kv_heads} key/value heads"));
        }
        let (present_key, present_value) = (k.clone(), v.clone());
        let (k, v) = if q_heads == kv_heads {
            (k, v)
        } else {
            // Each key/value head read by `rep` query heads in turn.
            let rep = q_heads / kv_heads;
            let repeat = |x: &Tensor| -> R<Tensor> {
                let s: Vec<i64> = x.shape().iter().map(|&d| d as i64).collect();
                let spread = [s[0] as usize, s[1] as usize, rep, s[2] as usize, s[3] as usize];
                nn(x.reshape(&[s[0], s[1], 1, s[2], s[3]])
                    .and_then(|y| y.broadcast_to(&spread))
                    .and_then(|y| y.reshape(&[s[0], q_heads as i64, s[2], s[3]])))
            };
            (repeat(&k)?, repeat(&v)?)
        };
        let scale = match attr(node, "scale") {
            Some(a) if a.f() > 0.0 => a.f() as f64,
            Some(a) => return Err(format!("scale {} must be above 0", a.f())),
            None => 1.0 / (qs[3] as f64).sqrt(),
        };
        let causal = attr_i(node, "is_causal", 0) != 0;
        let softcap = attr_f(node, "softcap", 0.0) as f64;
        if softcap < 0.0 {
            return Err(format!("softcap {softcap} must be at least 0"));
        }
        let (lq, lk) = (qs[2], ks[2]);
        // The bias the causal mask and the window add: query i (at
        // position past + i) sees key j where j <= past + i, and within
        // the window's reach on each side.
        let windowed = left >= 0 || right >= 0;
        let fixed = |idx: usize| {
            let (i, j) = ((idx / lk % lq + past) as i64, (idx % lk) as i64);
            let seen = !(causal && j > i) && (left < 0 || i - j <= left) && (right < 0 || j - i <= right);
            if seen { 0.0 } else { f64::NEG_INFINITY }
        };
        // Its values over `[lq, lk]`, within the size a constant folds to.
        let fixed_bias = || -> R<Vec<f64>> { Ok((0..numel(&[lq, lk])?).map(fixed).collect()) };
        let plain = given(3).is_none() && softcap == 0.0 && !windowed && !(causal && past > 0) && !scores_out;
        let (y, scores) = if plain {
            (nn(Tensor::attention(&q, &k, &v, causal, Some(scale)))?, None)
        } else {
            let mut scores = nn(q.matmul_t(&k, false, true).and_then(|s| s.mul_scalar(scale)))?;
            let raw = scores.clone();
            if softcap > 0.0 {
                scores =
                    nn(scores.mul_scalar(1.0 / softcap).and_then(|s| s.tanh()).and_then(|s| s.mul_scalar(softcap)))?;
            }
            let capped = scores.clone();
            let full = [batch, q_heads, lq, lk];
            let fits = |dims: &[usize]| broadcast(dims, &full).ok().as_deref() == Some(&full[..]);
            // The bias, the rows with no key to attend (1 where a row has
            // one, of the bias's shape but its last axis 1), and the bias
            // as it is where a row's was set to 0 (mode 2's output).
            let (bias, keep, shown) = match given(3) {
                None | Some(V::C(_)) => {
                    // Known: its rows with no key to attend are found
                    // here, their bias set to 0 (no -inf left to make
                    // NaN) and their probabilities zeroed.
                    let (dims, mut vals) = match given(3) {
                        Some(V::C(c)) => {
                            // (Read at the mask's own shape: `[lk]`, `[B, 1, 1, lk]`.)
                            let (own, vals) = mask_bias(c, lk)?;
                            let dims = broadcast(&own, &[lq, lk]).ok().filter(|d| fits(d)).ok_or_else(|| {
                                format!("the mask {:?} does not broadcast to the scores {full:?}", c.dims)
                            })?;
                            let n = numel(&dims)?;
                            (
                                dims.clone(),
                                (0..n).map(|idx| vals[broadcast_index(idx, &dims, &own)] + fixed(idx)).collect(),
                            )
                        }
                        _ => (vec![lq, lk], fixed_bias()?),
                    };
                    // (The scores output of mode 2 shows the bias as it is.)
                    let shown = vals.clone();
                    let mut keep = vec![1.0; vals.len() / lk];
                    for (row, kept) in vals.chunks_mut(lk).zip(keep.iter_mut()) {
                        if row.iter().all(|&b| b == f64::NEG_INFINITY) {
                            row.fill(0.0);
                            *kept = 0.0;
                        }
                    }
                    let bias = nn(g.constant(&vals, &TensorSpec::new(&dims[..], DType::F32)))?;
                    let keep = if keep.iter().all(|&kept| kept == 1.0) {
                        None
                    } else {
                        let mut rows = dims.clone();
                        if let Some(last) = rows.last_mut() {
                            *last = 1;
                        }
                        Some(nn(g.constant(&keep, &TensorSpec::new(&rows[..], DType::F32)))?)
                    };
                    let shown = match keep {
                        Some(_) if scores_out && mode == 2 => {
                            Some(nn(g.constant(&shown, &TensorSpec::new(&dims[..], DType::F32)))?)
                        }
                        _ => None,
                    };
                    (bias, keep, shown)
                }
                Some(V::T(m)) => {
                    let dims = m.shape().to_vec();
                    if dims.last() != Some(&lk) || !fits(&dims) {
                        return Err(format!(
                            "the mask {} does not broadcast to the scores {full:?} (a computed mask shorter than \
                             the keys is not supported)",
                            m.spec()
                        ));
                    }
                    let bias = if m.dtype() == DType::I1 {
                        let zero = nn(g.constant(&[0.0], &TensorSpec::new(&dims[..], DType::F32)))?;
                        let off = nn(g.constant(&[f64::NEG_INFINITY], &TensorSpec::new(&dims[..], DType::F32)))?;
                        nn(Tensor::select(m, &zero, &off))?
                    } else {
                        m.clone()
                    };
                    let bias = if causal || windowed {
                        let c = fixed_bias()?;
                        nn(g.constant(&c, &TensorSpec::new([lq, lk], DType::F32)).and_then(|c| bias.add(&c)))?
                    } else {
                        bias
                    };
                    // Rows with no key to attend: bias 0, probability 0.
                    let shape = bias.shape().to_vec();
                    let spec = TensorSpec::new(&shape[..], DType::F32);
                    let none = nn(bias.max(&[-1], true).and_then(|m| {
                        let inf = g.constant(&[f64::NEG_INFINITY], &TensorSpec::new(m.shape(), DType::F32))?;
                        m.compare(Compare::Eq, &inf)?.broadcast_to(&shape)
                    }))?;
                    let (zeros, ones) = (nn(g.constant(&[0.0], &spec))?, nn(g.constant(&[1.0], &spec))?);
                    let shown = bias.clone();
                    let bias = nn(Tensor::select(&none, &zeros, &bias))?;
                    (bias, Some(nn(Tensor::select(&none, &zeros, &ones))?), Some(shown))
                }
            };
            let biased = nn(scores.add(&bias))?;
            let mut p = nn(biased.softmax(-1))?;
            if let Some(keep) = keep {
                p = nn(p.mul(&keep))?;
            }
            let y = nn(p.matmul(&v))?;
            let scores = match mode {
                0 => raw,
                1 => capped,
                2 => match shown {
                    Some(b) => nn(capped.add(&b))?,
                    None => biased,
                },
                _ => p,
            };
            (y, Some(scores))
        };
        let y = if rank == 3 {
            let s = y.shape().to_vec();
            nn(y.permute(&[0, 2, 1, 3]).and_then(|y| y.reshape(&[s[0] as i64, s[2] as i64, (s[1] * s[3]) as i64])))?
        } else {
            y
        };
        let mut outs = vec![V::T(y), V::T(present_key), V::T(present_value)];
        outs.extend(scores.map(V::T));
        Ok(outs)
    }

    /// ONNX's RotaryEmbedding (opset 23): X `[B, heads, S, D]` (or `[B, S,
    /// heads * D]` with `num_heads`), its first `rotary_embedding_dim`
    /// features of each head (all by default) rotated pairwise by the
    /// angles of `cos_cache` and `sin_cache` (`[B, S, dim / 2]`, or rows
    /// of `[positions, dim / 2]` read at `position_ids` `[B, S]`): the
    /// halves, or the even and odd features where `interleaved`.
    fn rotary_embedding(&self, g: &Graph, node: &NodeProto, ins: &[Option<V>]) -> R<Tensor> {
        let given = |k: usize| ins.get(k).and_then(|v| v.as_ref());
        let tensor = |k: usize, like: DType| -> R<Tensor> {
            let v = given(k).ok_or_else(|| format!("input {k} is missing"))?;
            self.tensor(g, v, Some(like))
        };
        let x = tensor(0, DType::F32)?;
        let shape = x.shape().to_vec();
        // As [B, S, heads, D].
        let x4 = match x.rank() {
            4 => nn(x.permute(&[0, 2, 1, 3]))?,
            3 => {
                let n = attr_i(node, "num_heads", 0);
                if n < 1 || shape[2] as i64 % n != 0 {
                    return Err(format!("a 3-D input {} needs num_heads that divides its last dimension", x.spec()));
                }
                nn(x.reshape(&[shape[0] as i64, shape[1] as i64, n, shape[2] as i64 / n]))?
            }
            _ => return Err(format!("X {} must be of rank 3 or 4", x.spec())),
        };
        let [b, s, _, d] = <[usize; 4]>::try_from(x4.shape()).map_err(|_| "rank 4".to_string())?;
        let dim = match attr_i(node, "rotary_embedding_dim", 0) {
            0 => d,
            r if r > 0 && r as usize <= d && r % 2 == 0 => r as usize,
            r => return Err(format!("rotary_embedding_dim {r} must be even and at most the head size {d}")),
        };
        if d % 2 != 0 && dim == d {
            return Err(format!("the head size {d} is odd: it has no pairs to rotate"));
        }
        let half = dim / 2;
        let (mut cos, mut sin) = (tensor(1, DType::F32)?, tensor(2, DType::F32)?);
        if let Some(ids) = given(3) {
            let ids = self.tensor(g, ids, Some(DType::I64))?;
            if ids.shape() != [b, s] {
                return Err(format!("position_ids {} are not one per row and position [{b}, {s}]", ids.spec()));
            }
            for (what, cache) in [("cos_cache", &cos), ("sin_cache", &sin)] {
                if cache.rank() != 2 || cache.shape()[1] != half {
                    return Err(format!("{what} {} is not [positions, {half}]", cache.spec()));
                }
            }
            cos = nn(cos.gather(&ids, 0))?;
            sin = nn(sin.gather(&ids, 0))?;
        }
        for (what, cache) in [("cos_cache", &cos), ("sin_cache", &sin)] {
            if cache.shape() != [b, s, half] {
                return Err(format!("{what} {} is not [{b}, {s}, {half}] (rows, positions, dim / 2)", cache.spec()));
            }
        }
        let at = [b as i64, s as i64, 1, half as i64];
        let (cos, sin) = (nn(cos.reshape(&at))?, nn(sin.reshape(&at))?);
        let interleaved = attr_i(node, "interleaved", 0) != 0;
        let (x1, x2) = if interleaved {
            let pick = |from: usize| x4.slice(&[0, 0, 0, from], &[b, s, x4.shape()[2], dim], &[1, 1, 1, 2]);
            (nn(pick(0))?, nn(pick(1))?)
        } else {
            (nn(x4.narrow(-1, 0, half))?, nn(x4.narrow(-1, half, half))?)
        };
        let real = nn(cos.mul(&x1).and_then(|a| sin.mul(&x2).and_then(|b| a.sub(&b))))?;
        let imag = nn(sin.mul(&x1).and_then(|a| cos.mul(&x2).and_then(|b| a.add(&b))))?;
        let heads = x4.shape()[2] as i64;
        let rotated = if interleaved {
            let pair = [b as i64, s as i64, heads, half as i64, 1];
            nn(real.reshape(&pair).and_then(|r| {
                let i = imag.reshape(&pair)?;
                Tensor::concat(&[&r, &i], -1)?.reshape(&[b as i64, s as i64, heads, dim as i64])
            }))?
        } else {
            nn(Tensor::concat(&[&real, &imag], -1))?
        };
        let y = if dim < d {
            nn(x4.narrow(-1, dim, d - dim).and_then(|rest| Tensor::concat(&[&rotated, &rest], -1)))?
        } else {
            rotated
        };
        if x.rank() == 4 {
            nn(y.permute(&[0, 2, 1, 3]))
        } else {
            nn(y.reshape(&shape.iter().map(|&v| v as i64).collect::<Vec<_>>()))
        }
    }

    /// ONNX's RNN, GRU and LSTM, unrolled over the (static) sequence: per
    /// direction the input's products for every step at once (one GEMM),
    /// then per step the hidden state's product and the gates, in ONNX's
    /// gate order (LSTM i, o, f, c; GRU z, r, h) with the default
    /// activations; the steps' hidden states stacked as `Y`, the last as
    /// `Y_h` (and `Y_c`).
    fn recurrent(&self, g: &Graph, node: &NodeProto, ins: &[Option<V>]) -> R<Vec<V>> {
        let op = node.op_type();
        let given = |k: usize| ins.get(k).and_then(|v| v.as_ref());
        let tensor =
            |k: usize| -> R<Option<Tensor>> { given(k).map(|v| self.tensor(g, v, Some(DType::F32))).transpose() };
        let gates = match op {
            "LSTM" => 4,
            "GRU" => 3,
            _ => 1,
        };
        let h = attr_i(node, "hidden_size", 0);
        if h < 1 {
            return Err(format!("hidden_size {h} must be at least 1"));
        }
        let h = h as usize;
        // An RNN's activation, one per direction: tanh, or ReLU
        // (`nn.RNN(nonlinearity='relu')`) or a sigmoid.
        let mut rnn_activations: Vec<String> = Vec::new();
        if let Some(a) = attr(node, "activations") {
            let names: Vec<String> = a.strings.iter().map(|s| String::from_utf8_lossy(s).to_lowercase()).collect();
            let default: &[&str] = match op {
                "LSTM" => &["sigmoid", "tanh", "tanh"],
                "GRU" => &["sigmoid", "tanh"],
                _ => &["tanh"],
            };
            if op == "RNN" {
                if let Some(other) = names.iter().find(|n| !matches!(n.as_str(), "tanh" | "relu" | "sigmoid")) {
                    return Err(format!("activation {other:?} is not supported; an RNN's are Tanh, Relu or Sigmoid"));
                }
                rnn_activations = names;
            } else if names.chunks(default.len()).any(|c| c != default) {
                return Err(format!("activations {names:?} are not supported; only the defaults ({default:?})"));
            }
        }
        if attr(node, "clip").is_some() {
            return Err("clip is not supported".into());
        }
        if attr_i(node, "input_forget", 0) != 0 {
            return Err("input_forget=1 is not supported".into());
        }
        let layout = attr_i(node, "layout", 0);
        if !matches!(layout, 0 | 1) {
            return Err(format!("layout {layout} is not 0 (sequence first) or 1 (batch first)"));
        }
        let directions: Vec<bool> = match attr_s(node, "direction").as_deref().unwrap_or("forward") {
            "forward" => vec![false],
            "reverse" => vec![true],
            "bidirectional" => vec![false, true],
            other => return Err(format!("direction '{other}' is not one of forward, reverse, bidirectional")),
        };
        // Weights are floats (an integer W would be cast and left constant).
        for (k, what) in [(1, "W"), (2, "R"), (3, "B"), (7, "P")] {
            if let Some(V::C(c)) = given(k)
                && !c.float
            {
                return Err(format!("{what} holds integers; it takes floating-point weights"));
            }
        }
        let x = tensor(0)?.ok_or("the input X is missing")?;
        if x.rank() != 3 {
            return Err(format!("the input X is {}, not [sequence, batch, input] (or batch first)", x.spec()));
        }
        // [T, B, I] whatever the layout.
        let x = if layout == 1 { nn(x.permute(&[1, 0, 2]))? } else { x };
        let (steps, batch, width) = (x.shape()[0], x.shape()[1], x.shape()[2]);
        let d = directions.len();
        let w = tensor(1)?.ok_or("W is missing")?;
        let r = tensor(2)?.ok_or("R is missing")?;
        // hidden_size is the file's: sizes past what memory holds are refused
        // before any product of them overflows.
        if h > aicf_onnx::MAX_ELEMENTS / 8 {
            return Err(format!("hidden_size {h} is too large"));
        }
        let gh = gates * h;
        if w.shape() != [d, gh, width] || r.shape() != [d, gh, h] {
            return Err(format!(
                "W is {} and R {}; {d} direction(s) of {gates} gates of {h} over an input of {width} take [{d}, {gh}, \
                 {width}] and [{d}, {gh}, {h}]",
                w.spec(),
                r.spec()
            ));
        }
        let b = tensor(3)?;
        if let Some(b) = &b
            && b.shape() != [d, 2 * gh]
        {
            return Err(format!("B is {}, not [{d}, {}]", b.spec(), 2 * gh));
        }
        if let Some(V::C(lens)) = given(4) {
            if lens.vals.len() != batch {
                return Err(format!("sequence_lens holds {} lengths for a batch of {batch}", lens.vals.len()));
            }
            if lens.vals.iter().any(|&l| l as usize != steps) {
                return Err(format!(
                    "sequence_lens {:?} other than the whole sequence ({steps}) are not supported",
                    lens.vals
                ));
            }
        } else if given(4).is_some() {
            let input = node.input.get(4).is_some_and(|l| self.graph.input.iter().any(|i| i.name() == l));
            return Err(format!(
                "sequence_lens (input 4) must be known at import time (every sequence whole); it is {}",
                if input {
                    "an input of the model (sequences of several lengths are not supported)"
                } else {
                    "computed by the model"
                }
            ));
        }
        // Initial states: [D, B, H] (batch first: [B, D, H]).
        let initial = |k: usize| -> R<Option<Tensor>> {
            // A zero state known at import (PyTorch's default h0, folded
            // to a constant) is the zeros below, spread to the batch (a
            // constant of the batch's size fixed the model's batch).
            // (Or of one row: zeros are zeros over any batch, and an export
            // at a static batch of 1 wrote its state so.)
            let of = |b: usize| if layout == 1 { [b, d, h] } else { [d, b, h] };
            if let Some(V::C(c)) = given(k)
                && c.float
                && (c.dims == of(batch) || c.dims == of(1))
                && c.vals.iter().all(|&v| v == 0.0)
            {
                return Ok(None);
            }
            let Some(t) = tensor(k)? else { return Ok(None) };
            let t = if layout == 1 { nn(t.permute(&[1, 0, 2]))? } else { t };
            if t.shape() != [d, batch, h] {
                return Err(format!("initial state (input {k}) is {}, not [{d}, {batch}, {h}]", t.spec()));
            }
            Ok(Some(t))
        };
        let (h0, c0) = (initial(5)?, if op == "LSTM" { initial(6)? } else { None });
        // tf2onnx writes a Keras LSTM's one bias as Wb, and zeros as Rb:
        // that half is no parameter of the model (trained, the bias moved
        // at twice Keras's rate), so it is left out.
        let keras_bias = self.tf2onnx
            && node.input.get(3).and_then(|b| self.inits.get(b)).is_some_and(|t| {
                let values = t.data.to_f64();
                values.len() == d * 2 * gates * h
                    && (0..d).all(|k| {
                        let half = &values[k * 2 * gates * h..(k + 1) * 2 * gates * h][gates * h..];
                        half.iter().all(|&v| v == 0.0)
                    })
            });
        let peep = if op == "LSTM" { tensor(7)? } else { None };
        if let Some(p) = &peep
            && p.shape() != [d, 3 * h]
        {
            return Err(format!("P is {}, not [{d}, {}]", p.spec(), 3 * h));
        }
        let zeros = nn(x.scalar(0.0).and_then(|z| z.broadcast_to(&[batch, h])))?;
        let row = |t: &Tensor, k: usize, rows: usize, cols: usize| -> R<Tensor> {
            nn(t.narrow(0, k, 1).and_then(|v| v.reshape(&[rows as i64, cols as i64])))
        };
        let gate = |t: &Tensor, k: usize| nn(t.narrow(1, k * h, h));
        let (mut ys, mut hs, mut cs) = (Vec::new(), Vec::new(), Vec::new());
        for (dir, &reverse) in directions.iter().enumerate() {
            let wd = row(&w, dir, gh, width)?;
            let rd = row(&r, dir, gh, h)?;
            let (wb, rb) = match &b {
                Some(b) => {
                    let bd = nn(b.narrow(0, dir, 1).and_then(|v| v.reshape(&[2 * gh as i64])))?;
                    // (Wb first: the IR's order, which a checkpoint's
                    // model hash holds.)
                    let wb = nn(bd.narrow(0, 0, gh))?;
                    let rb = (!keras_bias).then(|| nn(bd.narrow(0, gh, gh))).transpose()?;
                    (Some(wb), rb)
                }
                None => (None, None),
            };
            // Every step's input product at once: [T, B, G H] (not folded
            // to [T B, I] first: a reshape that merges the batch into
            // another axis fixed the model's batch).
            let xw = nn(x.linear(&wd, wb.as_ref()))?;
            let mut hp = match &h0 {
                Some(t) => row(t, dir, batch, h)?,
                None => zeros.clone(),
            };
            let mut cp = match &c0 {
                Some(t) => row(t, dir, batch, h)?,
                None => zeros.clone(),
            };
            let pd = match &peep {
                Some(p) => Some(nn(p.narrow(0, dir, 1).and_then(|v| v.reshape(&[3 * h as i64])))?),
                None => None,
            };
            let mut outs: Vec<Tensor> = Vec::new();
            let order: Vec<usize> = if reverse { (0..steps).rev().collect() } else { (0..steps).collect() };
            for &step in &order {
                let xt = nn(xw.narrow(0, step, 1).and_then(|v| v.reshape(&[batch as i64, gh as i64])))?;
                let hr = nn(hp.linear(&rd, rb.as_ref()))?;
                let next = match op {
                    "LSTM" => {
                        let pre = nn(xt.add(&hr))?;
                        let peeped = |k: usize, c: &Tensor, v: Tensor| -> R<Tensor> {
                            match &pd {
                                Some(p) => {
                                    nn(p.narrow(0, k * h, h).and_then(|pk| c.mul(&pk)).and_then(|pc| v.add(&pc)))
                                }
                                None => Ok(v),
                            }
                        };
                        let i = nn(peeped(0, &cp, gate(&pre, 0)?)?.sigmoid())?;
                        let f = nn(peeped(2, &cp, gate(&pre, 2)?)?.sigmoid())?;
                        let cand = nn(gate(&pre, 3)?.tanh())?;
                        let c = nn(f.mul(&cp).and_then(|fc| i.mul(&cand).and_then(|ic| fc.add(&ic))))?;
                        let o = nn(peeped(1, &c, gate(&pre, 1)?)?.sigmoid())?;
                        cp = c;
                        nn(cp.tanh().and_then(|tc| o.mul(&tc)))?
                    }
                    "GRU" => {
                        let z = nn(gate(&xt, 0)?.add(&gate(&hr, 0)?).and_then(|v| v.sigmoid()))?;
                        let rt = nn(gate(&xt, 1)?.add(&gate(&hr, 1)?).and_then(|v| v.sigmoid()))?;
                        let hh = if attr_i(node, "linear_before_reset", 0) != 0 {
                            nn(rt.mul(&gate(&hr, 2)?))?
                        } else {
                            // (r * H) R_h^T + Rb_h.
                            let rh = nn(rd.narrow(0, 2 * h, h))?;
                            let rbh = match &rb {
                                Some(rb) => Some(nn(rb.narrow(0, 2 * h, h))?),
                                None => None,
                            };
                            nn(rt.mul(&hp).and_then(|v| v.linear(&rh, rbh.as_ref())))?
                        };
                        let cand = nn(gate(&xt, 2)?.add(&hh).and_then(|v| v.tanh()))?;
                        // (1 - z) cand + z H = cand + z (H - cand).
                        nn(hp.sub(&cand).and_then(|d| z.mul(&d)).and_then(|zd| cand.add(&zd)))?
                    }
                    _ => {
                        let pre = nn(xt.add(&hr))?;
                        match rnn_activations.get(dir).or(rnn_activations.first()).map(String::as_str) {
                            Some("relu") => nn(pre.relu())?,
                            Some("sigmoid") => nn(pre.sigmoid())?,
                            _ => nn(pre.tanh())?,
                        }
                    }
                };
                hp = next;
                outs.push(nn(hp.reshape(&[1, 1, batch as i64, h as i64]))?);
            }
            if reverse {
                outs.reverse();
            }
            let refs: Vec<&Tensor> = outs.iter().collect();
            ys.push(nn(Tensor::concat(&refs, 0))?);
            hs.push(nn(hp.reshape(&[1, batch as i64, h as i64]))?);
            cs.push(nn(cp.reshape(&[1, batch as i64, h as i64]))?);
        }
        let join = |parts: &[Tensor], axis: i64| -> R<Tensor> {
            let refs: Vec<&Tensor> = parts.iter().collect();
            if refs.len() == 1 { Ok(parts[0].clone()) } else { nn(Tensor::concat(&refs, axis)) }
        };
        // Y [T, D, B, H], Y_h and Y_c [D, B, H]; batch first: [B, T, D, H]
        // and [B, D, H].
        let (y, yh, yc) = (join(&ys, 1)?, join(&hs, 0)?, join(&cs, 0)?);
        let (y, yh, yc) = if layout == 1 {
            (nn(y.permute(&[2, 0, 1, 3]))?, nn(yh.permute(&[1, 0, 2]))?, nn(yc.permute(&[1, 0, 2]))?)
        } else {
            (y, yh, yc)
        };
        let mut out = vec![V::T(y), V::T(yh)];
        if op == "LSTM" {
            out.push(V::T(yc));
        }
        Ok(out)
    }

    /// One node of the graph (`index`: its place there, or its If's for
    /// a node of a branch, which `within` names) into `env`.
    fn trace_node(
        &mut self,
        g: &Graph,
        index: usize,
        node: &NodeProto,
        env: &mut HashMap<String, V>,
        within: &str,
    ) -> Result<(), ImportError> {
        let (model, opset) = (self.name.clone(), self.opset);
        let fail = |message: String| node_error(&model, index, node, opset, format!("{message}{within}"));
        if !node.domain().is_empty() && node.domain() != "ai.onnx" {
            return Err(fail(format!("domain '{}' is not supported (only the default domain)", node.domain())));
        }
        if !SUPPORTED.contains(&node.op_type()) {
            return Err(fail(format!("not supported; the importer supports: {}", SUPPORTED.join(", "))));
        }
        check_node(node).map_err(fail)?;
        if node.op_type() == "Identity" && node.output.first().is_some_and(|o| self.aliased.contains(o)) {
            return Ok(());
        }
        if node.op_type() == "If" {
            return self.trace_if(g, index, node, env);
        }
        if node.op_type() == "Loop" {
            return self.trace_loop(g, index, node, env, within);
        }
        if matches!(node.op_type(), "SplitToSequence" | "SequenceAt" | "SequenceLength" | "ConcatFromSequence") {
            return self.trace_sequence(g, node, env).map_err(fail);
        }
        let mut ins = Vec::new();
        for n in &node.input {
            ins.push(if n.is_empty() { None } else { Some(self.value(g, n, env).map_err(fail)?) });
        }
        let outs = self.node(&g, node, &ins).map_err(fail)?;
        if let Some(V::T(t)) = outs.iter().find(|v| matches!(v, V::T(t) if t.shape().contains(&0))) {
            return Err(fail(format!("it produces an empty tensor ({}), which AICF does not compile", t.spec())));
        }
        for (name, v) in node.output.iter().zip(outs) {
            if name.is_empty() {
                continue;
            }
            // ONNX names each value once: a second writer is a broken
            // graph, not a later value.
            if env.contains_key(name) {
                return Err(fail(format!(
                    "its output '{name}' is already a value of the graph (an input or an earlier node's \
                     output): each name is assigned once"
                )));
            }
            env.insert(name.clone(), v);
        }
        Ok(())
    }

    /// The value named `n`: the environment's, or a parameter's (made the
    /// first time it is read).
    fn value(&mut self, g: &Graph, n: &str, env: &mut HashMap<String, V>) -> R<V> {
        if let Some(v) = env.get(n) {
            Ok(v.clone())
        } else if self.params.contains(n) || self.states.contains(n) {
            let t = self.param(g, n)?;
            env.insert(n.to_string(), V::T(t.clone()));
            Ok(V::T(t))
        } else if self.empty_scans.contains(n) {
            Err(format!(
                "input '{n}' is the scan output of a loop that ran no iteration: an empty tensor, which AICF does \
                 not compile"
            ))
        } else {
            Err(format!("input '{n}' is not produced by any earlier node"))
        }
    }

    /// A Loop whose trip count and condition are known at import (tf2onnx
    /// writes a Keras GRU or SimpleRNN as TensorFlow's while loop: a trip
    /// count of the sequence's length, a condition of counters compared
    /// with constants): unrolled, its body traced once per iteration into
    /// the graph around it (whose values it reads), each iteration's
    /// carried values the next one's, its scan outputs stacked on a new
    /// first axis. A condition the model computes from its data is control
    /// flow AICF does not compile.
    fn trace_loop(
        &mut self,
        g: &Graph,
        index: usize,
        node: &NodeProto,
        env: &mut HashMap<String, V>,
        within: &str,
    ) -> Result<(), ImportError> {
        // Unrolled beyond this, a loop would make a graph too large to
        // compile in reasonable time (an LSTM of 512 steps takes a minute).
        const MOST: usize = 4096;
        let (model, opset) = (self.name.clone(), self.opset);
        let label = if node.name().is_empty() { format!("#{index}") } else { node.name().to_string() };
        let fail = |message: String| node_error(&model, index, node, opset, format!("{message}{within}"));
        let body = attr(node, "body").and_then(|a| a.g.as_ref()).ok_or_else(|| fail("no body".into()))?.clone();
        let carried = node.input.len().saturating_sub(2);
        if body.input.len() != carried + 2 {
            return Err(fail(format!(
                "its body takes {} inputs for the Loop's {carried} carried values (the iteration number and \
                 the condition, then one for each)",
                body.input.len()
            )));
        }
        let Some(scans) = body.output.len().checked_sub(carried + 1) else {
            return Err(fail(format!(
                "its body has {} outputs for the Loop's {carried} carried values (the condition, then one for \
                 each, then the scan outputs)",
                body.output.len()
            )));
        };
        if node.output.len() > carried + scans {
            return Err(fail(format!(
                "{} outputs; its body makes {carried} carried values and {scans} scan outputs",
                node.output.len()
            )));
        }
        let known = |v: V, what: &str| -> Result<f64, ImportError> {
            match v {
                V::C(c) if c.vals.len() == 1 => Ok(c.vals[0]),
                V::C(c) => Err(fail(format!("a {what} of {:?} values, not one", c.dims))),
                V::T(_) => Err(fail(format!(
                    "its {what} is computed from the model's data: control flow that depends on the data is \
                     not supported (a Loop whose trip count and condition are known at import is unrolled)"
                ))),
            }
        };
        let trip = match node.input.first().filter(|n| !n.is_empty()) {
            Some(n) => Some(known(self.value(g, n, env).map_err(fail)?, "trip count")?.max(0.0) as usize),
            None => None,
        };
        let mut go = match node.input.get(1).filter(|n| !n.is_empty()) {
            Some(n) => known(self.value(g, n, env).map_err(fail)?, "condition")? != 0.0,
            None => true,
        };
        let mut state = Vec::new();
        for n in &node.input[2.min(node.input.len())..] {
            if n.is_empty() {
                return Err(fail("a carried value without a name".into()));
            }
            state.push(self.value(g, n, env).map_err(fail)?);
        }
        // The names the body defines, each iteration anew; none may name a
        // value around it (ONNX forbids shadowing).
        let mut defined: Vec<String> = body.input.iter().map(|i| i.name().to_string()).collect();
        defined.extend(body.initializer.iter().map(|t| t.name().to_string()));
        defined.extend(nodes_within(&body).iter().flat_map(|n| n.output.iter().filter(|o| !o.is_empty()).cloned()));
        if let Some(shadow) = defined.iter().find(|d| env.contains_key(*d) || self.inits.contains_key(*d)) {
            return Err(fail(format!(
                "its body defines '{shadow}', a value of the graph around it (ONNX forbids shadowing)"
            )));
        }
        let mut constants = Vec::new();
        for t in &body.initializer {
            let c = aicf_onnx::tensor(t, self.base)
                .map_err(|e| fail(format!("initializer '{}' of its body: {e}", t.name())))?;
            constants.push((t.name().to_string(), V::C(Const::from_onnx(&c))));
        }
        let mut scanned: Vec<Vec<V>> = vec![Vec::new(); scans];
        let mut i = 0;
        while go && trip.is_none_or(|m| i < m) {
            if i == MOST {
                return Err(fail(format!(
                    "it runs more than {MOST} iterations{}: AICF unrolls a loop, and one this long makes a graph \
                     too large to compile",
                    if trip.is_none() { " (no trip count, and its condition stays true)" } else { "" }
                )));
            }
            let within = format!(" (iteration {i} of Loop '{label}'){within}");
            let mut bound = vec![
                (body.input[0].name().to_string(), V::C(Const::scalar(i as f64, false))),
                (body.input[1].name().to_string(), V::C(Const::scalar(1.0, false))),
            ];
            bound.extend(body.input[2..].iter().map(|b| b.name().to_string()).zip(state.drain(..)));
            bound.extend(constants.iter().cloned());
            env.extend(bound);
            for inner in &body.node {
                self.trace_node(g, index, inner, env, &within)?;
            }
            let mut outs = Vec::new();
            for o in &body.output {
                outs.push(
                    env.get(o.name())
                        .cloned()
                        .ok_or_else(|| fail(format!("its body's output '{}' is not produced{within}", o.name())))?,
                );
            }
            for d in &defined {
                env.remove(d);
            }
            let mut outs = outs.into_iter();
            go = known(outs.next().unwrap_or(V::C(Const::scalar(0.0, false))), "condition")? != 0.0;
            state.extend(outs.by_ref().take(carried));
            for (k, v) in outs.enumerate() {
                scanned[k].push(v);
            }
            i += 1;
        }
        self.branches.push((format!("Loop '{label}'"), format!("{i} iteration{}", if i == 1 { "" } else { "s" })));
        let mut results: Vec<Option<V>> = state.into_iter().map(Some).collect();
        for (k, values) in scanned.into_iter().enumerate() {
            // (A loop that ran no iteration has no scan output: an error
            // only where the graph reads it, [`Self::value`].)
            results.push(match values.is_empty() {
                true => None,
                false => Some(self.stack(g, &values).map_err(|m| fail(format!("scan output {k}: {m}")))?),
            });
        }
        for (name, v) in node.output.iter().zip(results) {
            if !name.is_empty() {
                if env.contains_key(name) {
                    return Err(fail(format!("its output '{name}' is already a value of the graph")));
                }
                match v {
                    Some(v) => {
                        env.insert(name.clone(), v);
                    }
                    None => {
                        self.empty_scans.insert(name.clone());
                    }
                }
            }
        }
        Ok(())
    }

    /// A Loop's scan output: each iteration's value, stacked on a new
    /// first axis (constants where all are).
    fn stack(&self, g: &Graph, values: &[V]) -> R<V> {
        let Some(first) = values.first() else {
            return Err("the loop ran no iteration, so it has no value (an empty tensor)".into());
        };
        let dims = shape_of(first);
        if let Some(k) = values.iter().position(|v| shape_of(v) != dims) {
            return Err(format!("iteration {k} makes {:?} where the first made {dims:?}", shape_of(&values[k])));
        }
        if let Some(cs) =
            values.iter().map(|v| if let V::C(c) = v { Some(c) } else { None }).collect::<Option<Vec<_>>>()
        {
            let mut out = Const { dims: [vec![values.len()], dims].concat(), vals: Vec::new(), float: cs[0].float };
            for c in cs {
                out.vals.extend(&c.vals);
            }
            return Ok(V::C(out));
        }
        let mut parts = Vec::new();
        for v in values {
            let t = self.tensor(g, v, None)?;
            let lifted: Vec<i64> = std::iter::once(1).chain(t.shape().iter().map(|&d| d as i64)).collect();
            parts.push(nn(t.reshape(&lifted))?);
        }
        let refs: Vec<&Tensor> = parts.iter().collect();
        Ok(V::T(nn(Tensor::concat(&refs, 0))?))
    }

    /// An If whose condition is known at import (TorchScript's exports
    /// test a shape, `squeeze(dim)` where the size might not be 1): the
    /// branch it takes, its nodes traced into the graph around it (whose
    /// values they read), its outputs the If's. A condition the model
    /// computes from its data is control flow AICF does not compile.
    fn trace_if(
        &mut self,
        g: &Graph,
        index: usize,
        node: &NodeProto,
        env: &mut HashMap<String, V>,
    ) -> Result<(), ImportError> {
        let (model, opset) = (self.name.clone(), self.opset);
        let fail = |message: String| node_error(&model, index, node, opset, message);
        let taken = match env.get(&node.input[0]) {
            Some(V::C(c)) if c.vals.len() == 1 => c.vals[0] != 0.0,
            Some(V::C(c)) => return Err(fail(format!("a condition of {:?} values, not one", c.dims))),
            _ => {
                return Err(fail(
                    "its condition is computed from the model's data: control flow that depends on the data is \
                     not supported (an If on shapes, known at import, is)"
                        .into(),
                ));
            }
        };
        let label = if node.name().is_empty() { format!("#{index}") } else { node.name().to_string() };
        self.branches.push((format!("If '{label}'"), (if taken { "then" } else { "else" }).to_string()));
        let name = if taken { "then_branch" } else { "else_branch" };
        let branch = node
            .attribute
            .iter()
            .find(|a| a.name() == name)
            .and_then(|a| a.g.as_ref())
            .ok_or_else(|| fail(format!("no {name}")))?
            .clone();
        if branch.output.len() != node.output.len() {
            return Err(fail(format!(
                "its {name} has {} outputs for the If's {}",
                branch.output.len(),
                node.output.len()
            )));
        }
        let within = format!(" (in the {name} of If '{}')", node.name());
        for inner in &branch.node {
            self.trace_node(g, index, inner, env, &within)?;
        }
        for (name, o) in node.output.iter().zip(&branch.output) {
            let v = env
                .get(o.name())
                .cloned()
                .ok_or_else(|| fail(format!("branch output '{}' is not produced", o.name())))?;
            if !name.is_empty() {
                env.insert(name.clone(), v);
            }
        }
        Ok(())
    }

    /// A Gather's table: where PyTorch declared it with a padding index
    /// (`nn.Embedding(.., padding_idx=p)`, a dynamo export's record), its
    /// row `p` is read through `hl.stop_gradient`, so training leaves it
    /// as PyTorch does (its gradient zero); other tables as they are.
    fn padded_table(&self, g: &Graph, node: &NodeProto, data: &V, axis: usize) -> R<Tensor> {
        let x = self.tensor(g, data, None)?;
        let row = node.input.first().and_then(|t| self.padding.get(t)).copied();
        let (Some(row), V::T(_), 0, true) = (row, data, axis, self.trains) else { return Ok(x) };
        let rows = x.shape()[0];
        if row < 0 || row >= rows as i64 {
            return Ok(x);
        }
        let mut column = vec![1i64; x.rank()];
        column[0] = rows as i64;
        let ids = nn(g.arange(rows).and_then(|r| r.reshape(&column)))?;
        let padding = nn(ids.scalar(row as f64).and_then(|p| ids.compare(Compare::Eq, &p)))?;
        let padding = nn(padding.broadcast_to(x.shape()))?;
        nn(x.detach().and_then(|frozen| Tensor::select(&padding, &frozen, &x)))
    }

    /// The sequence ops an unoptimized dynamo export writes for
    /// `torch.split` (`SplitToSequence`, then `SequenceAt` of each piece):
    /// a sequence is its tensors, held by name beside the values.
    fn trace_sequence(&mut self, g: &Graph, node: &NodeProto, env: &mut HashMap<String, V>) -> R<()> {
        let op = node.op_type();
        let out = node.output.first().filter(|o| !o.is_empty()).ok_or("no output")?.clone();
        let input = |k: usize| node.input.get(k).filter(|i| !i.is_empty());
        let value = |k: usize| input(k).and_then(|i| env.get(i)).cloned();
        let sequence = |k: usize| {
            input(k)
                .and_then(|i| self.sequences.get(i))
                .cloned()
                .ok_or_else(|| format!("input {k} is not a sequence that SplitToSequence made"))
        };
        match op {
            "SplitToSequence" => {
                let x = self.tensor(g, &value(0).ok_or("input 0 is missing")?, None)?;
                let axis = norm_axis(attr_i(node, "axis", 0), x.rank())?;
                let d = x.shape()[axis];
                let sizes: Vec<usize> = match value(1) {
                    None => vec![1; d],
                    Some(V::C(c)) if c.dims.is_empty() => {
                        let chunk = c.as_ints().first().copied().unwrap_or(0);
                        if chunk < 1 {
                            return Err(format!("split {chunk} is not a size"));
                        }
                        let chunk = chunk as usize;
                        (0..d.div_ceil(chunk)).map(|i| chunk.min(d - i * chunk)).collect()
                    }
                    Some(V::C(c)) => c.as_ints().iter().map(|&v| v.max(0) as usize).collect(),
                    Some(V::T(_)) => return Err("the split sizes must be known at import time".into()),
                };
                if sizes.iter().sum::<usize>() != d {
                    return Err(format!("split sizes {sizes:?} do not cover dimension {axis} of {}", x.spec()));
                }
                // (Without sizes, `keepdims=0` drops the split axis.)
                let squeeze = input(1).is_none() && attr_i(node, "keepdims", 1) == 0;
                let mut start = 0;
                let mut pieces = Vec::new();
                for size in sizes {
                    let piece = x.narrow(axis as i64, start, size).map_err(|e| e.to_string())?;
                    let piece = if squeeze {
                        let mut dims: Vec<i64> = piece.shape().iter().map(|&v| v as i64).collect();
                        dims.remove(axis);
                        piece.reshape(&dims).map_err(|e| e.to_string())?
                    } else {
                        piece
                    };
                    pieces.push(V::T(piece));
                    start += size;
                }
                self.sequences.insert(out, pieces);
            }
            "SequenceAt" => {
                let pieces = sequence(0)?;
                let Some(V::C(at)) = value(1) else { return Err("the position must be known at import time".into()) };
                let at = at.as_ints().first().copied().unwrap_or(0);
                let k = if at < 0 { at + pieces.len() as i64 } else { at };
                let piece = usize::try_from(k)
                    .ok()
                    .and_then(|k| pieces.get(k))
                    .ok_or_else(|| format!("position {at} is outside the sequence's {} tensors", pieces.len()))?;
                env.insert(out, piece.clone());
            }
            "SequenceLength" => {
                let pieces = sequence(0)?;
                env.insert(out, V::C(Const::scalar(pieces.len() as f64, false)));
            }
            _ => {
                // ConcatFromSequence: along `axis`, or stacked on a new one.
                let pieces = sequence(0)?;
                let tensors: Vec<Tensor> = pieces.iter().map(|p| self.tensor(g, p, None)).collect::<R<_>>()?;
                let first = tensors.first().ok_or("an empty sequence")?;
                let new_axis = attr_i(node, "new_axis", 0) != 0;
                let axis = norm_axis(attr_i(node, "axis", 0), first.rank() + usize::from(new_axis))?;
                let tensors: Vec<Tensor> = if new_axis {
                    tensors
                        .iter()
                        .map(|t| {
                            let mut dims: Vec<i64> = t.shape().iter().map(|&v| v as i64).collect();
                            dims.insert(axis, 1);
                            t.reshape(&dims).map_err(|e| e.to_string())
                        })
                        .collect::<R<_>>()?
                } else {
                    tensors
                };
                let refs: Vec<&Tensor> = tensors.iter().collect();
                env.insert(out, V::T(Tensor::concat(&refs, axis as i64).map_err(|e| e.to_string())?));
            }
        }
        Ok(())
    }

    /// Traces the graph's outputs `outputs` (by index, in that order)
    /// from `xs`, the graph inputs named `inputs`: only the nodes they
    /// depend on.
    fn trace_of(&mut self, xs: &[Tensor], inputs: &[String], outputs: &[usize]) -> Result<Vec<Tensor>, ImportError> {
        let g = xs[0].graph();
        self.batch_sizes.clear();
        self.reshaped_from.clear();
        let mut env: HashMap<String, V> = HashMap::new();
        for (name, x) in inputs.iter().zip(xs) {
            env.insert(name.clone(), V::T(x.clone()));
        }
        for (n, t) in self.inits.iter() {
            if !self.params.contains(n) && !self.states.contains(n) {
                env.insert(n.clone(), V::C(Const::from_onnx(t)));
            }
        }
        let wanted: Vec<&proto::ValueInfoProto> = outputs.iter().filter_map(|&k| self.graph.output.get(k)).collect();
        let read = reads_of(self.graph, &wanted.iter().map(|o| o.name()).collect::<Vec<_>>(), false);
        // An input this function does not take, read for its shape alone
        // (a target's, in @forward): zeros of its spec, whose ops no value
        // reads (canonicalization removes them).
        for (name, spec) in &self.input_specs {
            if !env.contains_key(name) && read.contains(name.as_str()) {
                let zeros =
                    xs[0].scalar(0.0).and_then(|z| z.cast(spec.dtype)).and_then(|z| z.broadcast_to(&spec.shape));
                let zeros = zeros.map_err(|e| ImportError::Model {
                    model: self.name.clone(),
                    message: format!("the shape of input '{name}': {e}"),
                })?;
                env.insert(name.clone(), V::T(zeros));
                self.shape_placeholders = true;
            }
        }
        let nodes = self.graph.node.clone();
        for (index, node) in nodes.iter().enumerate() {
            if node.output.iter().any(|o| read.contains(o.as_str())) {
                self.trace_node(&g, index, node, &mut env, "")?;
            }
        }
        let mut outputs = Vec::new();
        for o in wanted {
            let v = env.get(o.name()).cloned().ok_or_else(|| ImportError::Model {
                model: self.name.clone(),
                message: format!("output '{}' is not produced by any node", o.name()),
            })?;
            let t = match v {
                V::T(t) => t,
                V::C(c) => self.materialize(&g, &c, None).map_err(|m| ImportError::Model {
                    model: self.name.clone(),
                    message: format!("output '{}': {m}", o.name()),
                })?,
            };
            // A declared shape's known sizes must be what the graph computes
            // (symbolic ones, the batch, take any size).
            if let Some(declared) = declared_dims(o) {
                let computed = t.shape().to_vec();
                let agrees = declared.len() == computed.len()
                    && declared.iter().zip(&computed).all(|(d, &c)| d.is_none_or(|d| d == c));
                if !agrees {
                    let show: Vec<String> =
                        declared.iter().map(|d| d.map_or("?".to_string(), |d| d.to_string())).collect();
                    return Err(ImportError::Model {
                        model: self.name.clone(),
                        message: format!(
                            "output '{}' is declared [{}], the graph computes {:?}",
                            o.name(),
                            show.join(", "),
                            computed
                        ),
                    });
                }
            }
            outputs.push(t);
        }
        Ok(outputs)
    }

    /// Records the values `node` makes that fold the bound batch size
    /// ([`Importer::batch_sizes`]): a Shape of a tensor whose first
    /// dimension is the batch, its element 0 gathered, and that size cast,
    /// reshaped or squeezed.
    fn track_batch_size(&mut self, node: &NodeProto, ins: &[Option<V>]) {
        let (Some(batch), Some(out)) = (self.bound_batch, node.output.first()) else { return };
        let first = node.input.first().and_then(|n| self.batch_sizes.get(n)).cloned();
        let entry = match (node.op_type(), ins.first().and_then(|v| v.as_ref()), first) {
            // (A Shape ending at 1, the dynamo exporter's `x.size(0)`, is
            // the size itself.)
            ("Shape", Some(V::T(x)), _) if x.shape().first() == Some(&batch) && attr_i(node, "start", 0) == 0 => {
                Some((x.clone(), attr_i(node, "end", i64::MAX) != 1))
            }
            ("Gather", _, Some((x, true))) if matches!(ins.get(1).and_then(|v| v.as_ref()), Some(V::C(c)) if c.vals == [0.0]) => {
                Some((x, false))
            }
            ("Cast" | "Squeeze" | "Unsqueeze" | "Reshape" | "Identity" | "Flatten", _, Some((x, false))) => {
                Some((x, false))
            }
            _ => None,
        };
        if let Some(e) = entry {
            self.batch_sizes.insert(out.clone(), e);
        }
    }

    /// The operands of an arithmetic `node` where one is a folded batch size
    /// and the other a computed tensor: the size computed from its tensor's
    /// rows (a sum of ones over them, of the folded value's shape and the
    /// other operand's dtype), in the node's order. None otherwise.
    fn batch_operand(&self, node: &NodeProto, ins: &[Option<V>]) -> R<Option<(Tensor, Tensor)>> {
        let value = |k: usize| ins.get(k).and_then(|v| v.as_ref());
        for (k, other) in [(0, 1), (1, 0)] {
            let (Some(V::C(c)), Some(V::T(t))) = (value(k), value(other)) else { continue };
            let Some((x, false)) = node.input.get(k).and_then(|n| self.batch_sizes.get(n)) else { continue };
            if c.vals.len() != 1 {
                continue;
            }
            let nn = |r: nn::Result<Tensor>| r.map_err(|e| e.to_string());
            // (One value a row first, whatever it is: the ones are drawn
            // for the rows alone, not for every element of a [B, T, V].)
            let f = if x.dtype().is_float() { x.clone() } else { nn(x.cast(DType::F32))? };
            let axes: Vec<i64> = (1..f.rank() as i64).collect();
            let rows = if axes.is_empty() { f } else { nn(f.max(&axes, false))? };
            let ones = nn(rows.ones_like())?;
            let dims: Vec<i64> = c.dims.iter().map(|&d| d as i64).collect();
            let size = nn(ones.sum(&[0], false).and_then(|s| s.reshape(&dims)))?;
            let size = if size.dtype() == t.dtype() { size } else { nn(size.cast(t.dtype()))? };
            return Ok(Some(if k == 0 { (size, t.clone()) } else { (t.clone(), size) }));
        }
        Ok(None)
    }

    /// Whether `node` (a Sub) is the difference of a straight-through
    /// estimator: `Sub(h, x)` that an Add adds to a computed `x` again (`x +
    /// (x.round() - x).detach()`, Gumbel-softmax's hard form `y_hard -
    /// y_soft.detach() + y_soft`, a VQ-VAE's `x + (q - x).detach()`, whose
    /// `detach` no export records). Written without one it would be `h` with
    /// `x`'s gradient cancelled, which no model means. The whole difference
    /// is detached: `h`'s gradient through it is dropped, as a VQ-VAE's is
    /// (`h - x.detach() + x` would keep it; both export alike). A constant
    /// `x` (the dynamo exporter's one initializer for equal scalars: `2 s -
    /// 1 + 1`) is no estimator: detaching a constant changes nothing.
    fn straight_through(&self, node: &NodeProto) -> bool {
        let [h, x] = &node.input[..] else { return false };
        let Some(out) = node.output.first() else { return false };
        if self.inits.contains_key(x)
            || self.graph.node.iter().any(|n| n.op_type() == "Constant" && n.output.contains(x))
        {
            return false;
        }
        // (Its only reader: a difference read elsewhere too, by a penalty
        // on it, keeps its gradient there.)
        let readers: Vec<&NodeProto> = self.graph.node.iter().filter(|n| n.input.contains(out)).collect();
        h != x
            && matches!(readers[..], [n] if n.op_type() == "Add"
                && n.input.len() == 2
                && ((n.input[0] == *out && n.input[1] == *x) || (n.input[1] == *out && n.input[0] == *x)))
    }

    /// Whether `node` (a Sub) takes away again a value its first operand
    /// added to a value without gradient: `Sub(Add(b, h), h)`, a
    /// straight-through estimator's `b + h - h.detach()` (value `b`, `h`'s
    /// gradient), whose `detach` no export records; the subtrahend is
    /// detached. `b` comes from an op without gradient (a comparison, a
    /// rounding, an argmax or one-hot, noise, through casts and reshapes),
    /// and the sum is read by this Sub alone: `z2 - z` of an update `z2 = z
    /// + f(z)` that the model also reads is a difference, not an estimator.
    fn straight_through_subtrahend(&self, node: &NodeProto) -> bool {
        let [sum, h] = &node.input[..] else { return false };
        let Some(add) = self.graph.node.iter().find(|n| n.output.first() == Some(sum)) else { return false };
        let only_reader = self.graph.node.iter().filter(|n| n.input.contains(sum)).count() == 1;
        add.op_type() == "Add"
            && add.input.len() == 2
            && only_reader
            && add.input.iter().filter(|i| *i == h).count() == 1
            && add.input.iter().find(|i| *i != h).is_some_and(|b| self.gradient_free(b, 8))
    }

    /// Whether value `name` carries no gradient by the op that makes it (a
    /// comparison, a rounding, an argmax, a one-hot, noise), through at
    /// most `depth` casts, reshapes and scatters of constants.
    fn gradient_free(&self, name: &str, depth: usize) -> bool {
        let Some(n) = self.graph.node.iter().find(|n| n.output.iter().any(|o| o == name)) else { return false };
        match n.op_type() {
            "Round" | "Floor" | "Ceil" | "Sign" | "ArgMax" | "ArgMin" | "OneHot" | "Equal" | "Less" | "Greater"
            | "LessOrEqual" | "GreaterOrEqual" | "Not" | "And" | "Or" | "Xor" | "IsNaN" | "IsInf" => true,
            op if NOISE.contains(&op) => true,
            "Cast" | "Reshape" | "Squeeze" | "Unsqueeze" | "Identity" | "Transpose" | "Flatten" | "Expand" => {
                depth > 0 && n.input.first().is_some_and(|i| self.gradient_free(i, depth - 1))
            }
            _ => false,
        }
    }

    fn param(&mut self, g: &Graph, onnx: &str) -> R<Tensor> {
        let t = &self.inits[onnx];
        let name = match self.names.get(onnx) {
            Some(n) => n.clone(),
            None => {
                let mut n = param_name(onnx, self.legacy_names);
                while self.names.values().any(|v| *v == n) {
                    n.push('_');
                }
                self.names.insert(onnx.to_string(), n.clone());
                n
            }
        };
        let spec = TensorSpec::f32(t.dims.clone());
        if self.states.contains(onnx) {
            let slot = name.rsplit('.').next().unwrap_or("running").to_string();
            return g.state(&name, &slot, &spec, Init::Data).map_err(|e| e.to_string());
        }
        let owner = name.rsplit_once('.').map(|(o, _)| o.to_string()).unwrap_or_default();
        let p = g.param(&name, &owner, &spec, Init::Data).map_err(|e| e.to_string())?;
        match self.broadcast.get(onnx) {
            Some(full) => p.broadcast_to(full).map_err(|e| e.to_string()),
            None => Ok(p),
        }
    }

    /// A constant as an `hl.constant` (`like`: the dtype of the tensor it
    /// meets; floats default to f32, integers to i32, booleans are i1).
    fn materialize(&self, g: &Graph, c: &Const, like: Option<DType>) -> R<Tensor> {
        if c.dims.contains(&0) {
            return Err(format!("an empty constant ({:?}), which AICF does not compile", c.dims));
        }
        let dtype = like.unwrap_or(if c.float { DType::F32 } else { DType::I32 });
        g.constant(&c.vals, &TensorSpec::new(c.dims.clone(), dtype)).map_err(|e| e.to_string())
    }

    /// `indices` (constant or computed, negative ones counting from the
    /// end) as positions along an axis of `n` with elements `stride`
    /// apart: `i * stride`, an i32 tensor of the indices' shape. Constant
    /// indices are checked here; computed ones read a table of the `n`
    /// offsets (an `hl.gather`), whose kernel checks each index against
    /// `n` before the call as an embedding's ids are checked (and the
    /// trainer checks a data set's labels), so that an index out of its
    /// axis is an error and never reads a neighbouring row.
    fn offsets(&self, g: &Graph, indices: &V, n: usize, stride: usize, what: &str) -> R<Tensor> {
        if n.checked_mul(stride).is_none_or(|m| m > i32::MAX as usize) {
            return Err(format!("{what}: {n} x {stride} elements, beyond the 2^31 an i32 index reaches"));
        }
        match indices {
            V::C(c) => {
                let d = n as i64;
                let vals = c
                    .as_ints()
                    .iter()
                    .map(|&k| match k {
                        k if (-d..d).contains(&k) => Ok(((if k < 0 { k + d } else { k }) as usize * stride) as f64),
                        k => Err(format!("{what} index {k} is out of range for an axis of {n} (in [-{n}, {n}))")),
                    })
                    .collect::<R<_>>()?;
                self.materialize(g, &Const { dims: c.dims.clone(), vals, float: false }, Some(DType::I32))
            }
            V::T(i) => {
                if i.dtype().is_float() {
                    return Err(format!("{what}'s indices are {:?}, not integers", i.dtype()));
                }
                let i = if i.dtype() == DType::I32 { i.clone() } else { nn(i.cast(DType::I32))? };
                let spec = TensorSpec::new(i.shape(), DType::I32);
                let negative = nn(i.compare(Compare::Lt, &nn(g.constant(&[0.0], &spec))?))?;
                let wrapped = nn(Tensor::select(&negative, &nn(i.add(&nn(g.constant(&[n as f64], &spec))?))?, &i))?;
                let table: Vec<f64> = (0..n).map(|k| (k * stride) as f64).collect();
                let table = nn(g.constant(&table, &TensorSpec::new(vec![n], DType::I32)))?;
                nn(table.gather(&wrapped, 0))
            }
        }
    }

    /// Where each element of `indices` points into data of `dims`
    /// flattened, for GatherElements and ScatterElements along `axis`: the
    /// index's offset along the axis plus the constant offset of its other
    /// coordinates (an i32 tensor of the indices' shape).
    fn element_positions(&self, g: &Graph, indices: &V, dims: &[usize], axis: usize, op: &str) -> R<Tensor> {
        let idims = shape_of(indices);
        if idims.len() != dims.len() || idims.iter().zip(dims).enumerate().any(|(d, (&i, &n))| d != axis && i > n) {
            return Err(format!(
                "{op} of data {dims:?} at indices {idims:?} (axis {axis}): the indices must be of the data's rank \
                 and no longer on the other axes"
            ));
        }
        let total = numel(dims)?;
        if total > i32::MAX as usize {
            return Err(format!("{op} of data {dims:?}: {total} elements, beyond an i32 index"));
        }
        let (ds, is) = (strides_of(dims), strides_of(&idims));
        let along = self.offsets(g, indices, dims[axis], ds[axis], op)?;
        let base: Vec<f64> = (0..numel(&idims)?)
            .map(|p| {
                (0..dims.len()).filter(|&d| d != axis).map(|d| (p / is[d]) % idims[d] * ds[d]).sum::<usize>() as f64
            })
            .collect();
        if base.iter().all(|&b| b == 0.0) {
            return Ok(along);
        }
        nn(along.add(&nn(g.constant(&base, &TensorSpec::new(idims, DType::I32)))?))
    }

    /// ONNX GatherElements (`torch.gather`) of a computed tensor or at
    /// computed indices: `out[p] = data[p with p[axis] = indices[p]]`, a
    /// gather of the flattened data at each element's position, so the
    /// gradient is the gather's scatter-add.
    fn gather_elements(&self, g: &Graph, data: &V, indices: &V, axis: i64) -> R<Tensor> {
        let dims = shape_of(data);
        let axis = norm_axis(axis, dims.len())?;
        let at = self.element_positions(g, indices, &dims, axis, "GatherElements")?;
        let x = self.tensor(g, data, None)?;
        nn(nn(x.reshape(&[numel(&dims)? as i64]))?.gather(&at, 0))
    }

    /// ONNX ScatterElements (`scatter`, `scatter_add`) where anything is
    /// computed: the updates added at their elements' positions in the
    /// flattened data ([`Importer::scatter_into`]).
    fn scatter_elements(&self, g: &Graph, data: &V, indices: &V, updates: &V, axis: i64, reduction: &str) -> R<Tensor> {
        let dims = shape_of(data);
        let axis = norm_axis(axis, dims.len())?;
        if shape_of(updates) != shape_of(indices) {
            return Err(format!(
                "ScatterElements' updates {:?} are not of the indices' shape {:?}",
                shape_of(updates),
                shape_of(indices)
            ));
        }
        let at = self.element_positions(g, indices, &dims, axis, "ScatterElements")?;
        self.scatter_into(g, data, &at, updates, &[numel(&dims)?], reduction, "ScatterElements")
    }

    /// `updates` written into `data` (viewed as `view`: rows, then each
    /// row's slice) at the rows `at` names, combined by `reduction`: added
    /// (`add`), or in place of the data (`none`; where several updates
    /// name one row, their mean: exact where they write one value, as a
    /// k-hot `scatter(1, idx, 1.0)` does, where ONNX leaves the result
    /// undefined). One scatter-add each, so the gradient reaches the
    /// updates (a gather) and the data where it survives.
    #[allow(clippy::too_many_arguments)]
    fn scatter_into(
        &self,
        g: &Graph,
        data: &V,
        at: &Tensor,
        updates: &V,
        view: &[usize],
        reduction: &str,
        op: &str,
    ) -> R<Tensor> {
        let dims = shape_of(data);
        let dtype = match (data, updates) {
            (V::T(x), _) | (_, V::T(x)) => x.dtype(),
            _ => DType::F32,
        };
        if !dtype.is_float() {
            return Err(format!("{op} of integers the model computes is not supported (of constants, it is folded)"));
        }
        if !matches!(reduction, "none" | "add") {
            return Err(format!(
                "{op} with reduction '{reduction}': its indices and updates must be known at import time \
                 (constants); here they are computed (reductions none and add take computed ones)"
            ));
        }
        let x = self.tensor(g, data, Some(dtype))?;
        let u = self.tensor(g, updates, Some(dtype))?;
        let places = numel(at.shape())?;
        let mut rows_shape = vec![places as i64];
        rows_shape.extend(view[1..].iter().map(|&d| d as i64));
        if numel(u.shape())? != places * numel(&view[1..])? {
            return Err(format!("{op}'s updates {:?} do not fit {places} places of {:?}", u.shape(), &view[1..]));
        }
        let at = nn(at.reshape(&[places as i64]))?;
        let dims_i: Vec<i64> = dims.iter().map(|&d| d as i64).collect();
        let added = nn(nn(nn(u.reshape(&rows_shape))?.scatter_add(&at, 0, view))?.reshape(&dims_i))?;
        if reduction == "add" {
            return nn(x.add(&added));
        }
        let slice: Vec<usize> = rows_shape.iter().map(|&d| d as usize).collect();
        let ones = nn(g.constant(&[1.0], &TensorSpec::new(slice, dtype)))?;
        let count = nn(nn(ones.scatter_add(&at, 0, view))?.reshape(&dims_i))?;
        let spec = TensorSpec::new(dims.clone(), dtype);
        let written = nn(count.compare(Compare::Gt, &nn(g.constant(&[0.0], &spec))?))?;
        let mean = nn(added.div(&nn(count.maximum(&nn(g.constant(&[1.0], &spec))?))?))?;
        nn(Tensor::select(&written, &mean, &x))
    }

    /// The rows each index tuple of GatherND or ScatterND names in data of
    /// `dims` viewed as (the `b` batch axes and the tuple's axes
    /// flattened) x (the rest): the tuple's offsets along each axis added,
    /// with the batch position's. Returns the rows (an i32 tensor of the
    /// tuples' shape) and the view.
    fn nd_positions(&self, g: &Graph, indices: &V, dims: &[usize], b: usize, op: &str) -> R<(Tensor, Vec<usize>)> {
        let idims = shape_of(indices);
        let (dr, ir) = (dims.len(), idims.len());
        let k = *idims.last().ok_or(format!("{op}'s indices are a scalar (rank 1 at least)"))?;
        if b >= ir || b + k > dr || dims[..b] != idims[..b] {
            return Err(format!(
                "{op} of data {dims:?} at indices {idims:?} with batch_dims {b}: the shapes do not fit"
            ));
        }
        let rows = numel(&dims[..b + k])?;
        if rows > i32::MAX as usize {
            return Err(format!("{op} of data {dims:?}: {rows} indexed slices, beyond an i32 index"));
        }
        let strides = strides_of(&dims[..b + k]);
        let tuple_dims = idims[..ir - 1].to_vec();
        let mut at: Option<Tensor> = None;
        let mut add = |t: Tensor| -> R<()> {
            at = Some(match at.take() {
                None => t,
                Some(a) => nn(a.add(&t))?,
            });
            Ok(())
        };
        if b > 0 {
            let per_batch: usize = idims[b..ir - 1].iter().product();
            let base: Vec<f64> =
                (0..numel(&tuple_dims)?).map(|t| (t / per_batch.max(1) * strides[b - 1]) as f64).collect();
            add(nn(g.constant(&base, &TensorSpec::new(tuple_dims.clone(), DType::I32)))?)?;
        }
        for j in 0..k {
            // The tuples' j-th index, of the tuples' shape.
            let column = match indices {
                V::C(c) => V::C(Const {
                    dims: tuple_dims.clone(),
                    vals: c.vals.iter().skip(j).step_by(k).copied().collect(),
                    float: false,
                }),
                V::T(i) => {
                    let pick = nn(g.constant(&[j as f64], &TensorSpec::new(vec![1], DType::I32)))?;
                    let shape: Vec<i64> = tuple_dims.iter().map(|&d| d as i64).collect();
                    V::T(nn(nn(i.gather(&pick, (ir - 1) as i64))?.reshape(&shape))?)
                }
            };
            add(self.offsets(g, &column, dims[b + j], strides[b + j], op)?)?;
        }
        let at = at.ok_or(format!("{op} with tuples of no indices"))?;
        let mut view = vec![rows];
        view.extend(&dims[b + k..]);
        Ok((at, view))
    }

    /// ONNX GatherND of a computed tensor or at computed indices: one
    /// gather of the rows the tuples name ([`Importer::nd_positions`]).
    fn gather_nd(&self, g: &Graph, data: &V, indices: &V, batch_dims: i64) -> R<Tensor> {
        let b = usize::try_from(batch_dims).map_err(|_| format!("batch_dims {batch_dims} is negative"))?;
        let (at, view) = self.nd_positions(g, indices, &shape_of(data), b, "GatherND")?;
        let x = self.tensor(g, data, None)?;
        let view: Vec<i64> = view.iter().map(|&d| d as i64).collect();
        nn(nn(x.reshape(&view))?.gather(&at, 0))
    }

    /// The ONNX element type of value `name` where the graph says it: an
    /// initializer's, a Constant node's tensor's, a declared input's or
    /// value's.
    fn element_type(&self, name: &str) -> Option<DataType> {
        if let Some(t) = self.inits.get(name) {
            return Some(t.data_type);
        }
        let constant = nodes_within(self.graph)
            .into_iter()
            .find(|n| n.op_type() == "Constant" && n.output.iter().any(|o| o == name))
            .and_then(|n| n.attribute.iter().find(|a| a.name() == "value").and_then(|a| a.t.as_ref()));
        if let Some(t) = constant {
            return DataType::try_from(t.data_type()).ok();
        }
        self.graph.value_info.iter().chain(&self.graph.input).find(|v| v.name() == name).and_then(|v| {
            match v.r#type.as_ref()?.value.as_ref()? {
                proto::type_proto::Value::TensorType(t) => DataType::try_from(t.elem_type()).ok(),
                _ => None,
            }
        })
    }

    fn tensor(&self, g: &Graph, v: &V, like: Option<DType>) -> R<Tensor> {
        match v {
            V::T(t) => Ok(t.clone()),
            V::C(c) => self.materialize(g, c, like),
        }
    }

    /// [`Self::node`] for a node of one tensor output (the 2-D op a 1-D or
    /// 3-D one runs as).
    fn node_tensor(&mut self, g: &Graph, node: &NodeProto, ins: &[Option<V>]) -> R<Tensor> {
        match self.node(g, node, ins)?.into_iter().next() {
            Some(V::T(y)) => Ok(y),
            _ => Err(format!("the {} made no tensor", node.op_type())),
        }
    }

    fn node(&mut self, g: &Graph, node: &NodeProto, ins: &[Option<V>]) -> R<Vec<V>> {
        self.track_batch_size(node, ins);
        let op = node.op_type();
        // A constant of the batch's rows all alike (a causal or padding
        // mask the export built at its batch from the input's shape:
        // Hugging Face's) meets a computed operand as one row, broadcast:
        // at its rows it fixed the model's batch.
        let one_rows;
        let ins = match op {
            "Add" | "Sub" | "Mul" | "Div" | "Pow" | "And" | "Or" | "Xor" | "Equal" | "Less" | "Greater"
            | "LessOrEqual" | "GreaterOrEqual" | "Where" => {
                let computed: Vec<&Tensor> =
                    ins.iter().filter_map(|v| if let Some(V::T(x)) = v { Some(x) } else { None }).collect();
                let row = |v: &Option<V>| match v {
                    Some(V::C(c)) => computed.iter().find_map(|x| one_row(c, x)).map(|r| Some(V::C(r))),
                    _ => None,
                };
                let rows: Vec<Option<Option<V>>> = ins.iter().map(row).collect();
                if rows.iter().any(Option::is_some) {
                    one_rows =
                        rows.into_iter().zip(ins).map(|(r, v)| r.unwrap_or_else(|| v.clone())).collect::<Vec<_>>();
                    &one_rows[..]
                } else {
                    ins
                }
            }
            _ => ins,
        };
        // (The tensor a chain of reshapes began from: a reshape of a
        // reshape is one of it, and a batch flattened away between them is
        // kept; the chain's ends are what `hl-set-batch` can follow.)
        let reshaped_root = match (op, ins.first(), node.input.first()) {
            ("Flatten" | "Reshape", Some(Some(V::T(x))), Some(name)) => {
                Some(self.reshaped_from.get(name).cloned().unwrap_or_else(|| x.clone()))
            }
            _ => None,
        };
        if let (Some(root), Some(out)) = (&reshaped_root, node.output.first()) {
            self.reshaped_from.insert(out.clone(), root.clone());
        }
        let input =
            |k: usize| -> R<&V> { ins.get(k).and_then(|v| v.as_ref()).ok_or_else(|| format!("input {k} is missing")) };
        let konst = |k: usize, what: &str| -> R<Const> {
            match input(k)? {
                V::C(c) => Ok(c.clone()),
                V::T(_) => Err(format!("{what} (input {k}) must be known at import time, it is computed by the model")),
            }
        };
        let optional_const = |k: usize| -> R<Option<Const>> {
            match ins.get(k).and_then(|v| v.as_ref()) {
                None => Ok(None),
                Some(V::C(c)) => Ok(Some(c.clone())),
                Some(V::T(_)) => Err(format!("input {k} must be known at import time")),
            }
        };
        let all_const = ins.iter().flatten().all(|v| matches!(v, V::C(_))) && !ins.is_empty();
        let t = |k: usize| -> R<Tensor> { self.tensor(g, input(k)?, None) };
        // Two operands with the dtype of the traced one for a constant.
        let pair = |this: &Self| -> R<(Tensor, Tensor)> {
            let (a, b) = (input(0)?, input(1)?);
            let dtype = match (a, b) {
                (V::T(x), _) | (_, V::T(x)) => Some(x.dtype()),
                _ => None,
            };
            let (a, b) = (this.tensor(g, a, dtype)?, this.tensor(g, b, dtype)?);
            // Integers of two widths (ONNX's int64 both: an input's labels
            // imported as i32, an ArgMax's i64) meet at the wider.
            match (a.dtype(), b.dtype()) {
                (DType::I32, DType::I64) => Ok((a.cast(DType::I64).map_err(|e| e.to_string())?, b)),
                (DType::I64, DType::I32) => Ok((a, b.cast(DType::I64).map_err(|e| e.to_string())?)),
                _ => Ok((a, b)),
            }
        };
        let one = |t: Tensor| Ok(vec![V::T(t)]);
        match op {
            "Identity" => Ok(vec![input(0)?.clone()]),
            "Constant" => {
                let a = node.attribute.first().ok_or("a Constant without a value")?;
                let c = match a.name() {
                    "value" => Const::from_onnx(
                        &aicf_onnx::tensor(a.t.as_ref().ok_or("value is not a tensor")?, self.base)
                            .map_err(|e| e.to_string())?,
                    ),
                    "value_float" => Const::scalar(a.f() as f64, true),
                    "value_floats" => Const {
                        dims: vec![a.floats.len()],
                        vals: a.floats.iter().map(|&x| x as f64).collect(),
                        float: true,
                    },
                    "value_int" => Const::scalar(a.i() as f64, false),
                    "value_ints" => Const::ints(&a.ints),
                    other => return Err(format!("Constant's '{other}' is not supported")),
                };
                Ok(vec![V::C(c)])
            }
            "Shape" => {
                let shape: Vec<i64> = match input(0)? {
                    V::T(x) => x.shape().iter().map(|&d| d as i64).collect(),
                    V::C(c) => c.dims.iter().map(|&d| d as i64).collect(),
                };
                let r = shape.len() as i64;
                let clamp = |v: i64| if v < 0 { (v + r).max(0) } else { v.min(r) };
                let start = clamp(attr_i(node, "start", 0)) as usize;
                let end = clamp(attr_i(node, "end", r)) as usize;
                Ok(vec![V::C(Const::ints(&shape[start..end.max(start)]))])
            }
            "ConstantOfShape" => {
                let shape = konst(0, "the shape")?.as_ints();
                if shape.iter().any(|&d| d < 0) {
                    return Err(format!("negative dimension in {shape:?}"));
                }
                let (v, float) = match attr(node, "value").and_then(|a| a.t.as_ref()) {
                    Some(t) => {
                        let t = aicf_onnx::tensor(t, self.base).map_err(|e| e.to_string())?;
                        (t.data.to_f64().first().copied().unwrap_or(0.0), t.is_float())
                    }
                    None => (0.0, true),
                };
                let dims: Vec<usize> = shape.iter().map(|&d| d as usize).collect();
                let n = numel(&dims)?;
                Ok(vec![V::C(Const { dims, vals: vec![v; n], float })])
            }
            // A 2-D identity (shifted by k) of the input's shape: a
            // constant, as the shape is known at import.
            "EyeLike" => {
                let (dims, float) = match input(0)? {
                    V::T(x) => (x.shape().to_vec(), x.dtype().is_float()),
                    V::C(c) => (c.dims.clone(), c.float),
                };
                let [_, cols] = dims[..] else {
                    return Err(format!("the input has shape {dims:?}; EyeLike takes a 2-D one"));
                };
                let float = match attr(node, "dtype").map(|a| DataType::try_from(a.i() as i32)) {
                    None => float,
                    Some(Ok(d)) => is_float_type(d),
                    Some(Err(_)) => return Err("unknown dtype".into()),
                };
                let k = attr_i(node, "k", 0);
                let n = numel(&dims)?;
                let vals =
                    (0..n).map(|i| ((i % cols) as i64 - (i / cols) as i64 == k) as i32 as f64).collect::<Vec<_>>();
                Ok(vec![V::C(Const { dims, vals, float })])
            }
            "Range" => {
                let (s, l, d) = (konst(0, "start")?, konst(1, "limit")?, konst(2, "delta")?);
                let (s, l, d) = (first(&s, "start")?, first(&l, "limit")?, first(&d, "delta")?);
                if d == 0.0 {
                    return Err("delta is 0".into());
                }
                if ![s, l, d].iter().all(|v| v.is_finite()) {
                    return Err(format!("start {s}, limit {l} and delta {d} must be finite"));
                }
                // Constants are folded in f64: an integer range past 2^53
                // would count its elements (and hold its values) inexactly.
                let exact = (1u64 << 53) as f64;
                if !konst(0, "start")?.float && [s, l, d].iter().any(|v| v.abs() > exact) {
                    return Err(format!(
                        "an integer range with start {s}, limit {l} or delta {d} beyond 2^53 is not supported"
                    ));
                }
                let n = ((l - s) / d).ceil().max(0.0) as usize;
                if n > aicf_onnx::MAX_ELEMENTS {
                    return Err(format!("{n} elements is too many"));
                }
                let float = konst(0, "start")?.float;
                Ok(vec![V::C(Const { dims: vec![n], vals: (0..n).map(|i| s + i as f64 * d).collect(), float })])
            }
            // Max and Min of one input or more (the unoptimized dynamo
            // export writes `table[pos]`'s index as a Max of one), NaN
            // propagated as numpy's maximum does.
            "Max" | "Min" if all_const && ins.len() != 2 => {
                let mut acc = konst(0, "input 0")?;
                for k in 1..ins.len() {
                    acc = fold_binary(&acc, &konst(k, "an input")?, if op == "Max" { nan_max } else { nan_min })?;
                }
                Ok(vec![V::C(acc)])
            }
            "Add" | "Sub" | "Mul" | "Div" | "Pow" | "Mod" | "Max" | "Min" | "Equal" | "Less" | "Greater"
            | "LessOrEqual" | "GreaterOrEqual" | "And" | "Or" | "Xor"
                if all_const =>
            {
                let (a, b) = (konst(0, "a")?, konst(1, "b")?);
                let int_div = !a.float && !b.float;
                let f: Box<dyn Fn(f64, f64) -> f64> = match op {
                    // ONNX's Mod: fmod=1 C's remainder (the dividend's
                    // sign), else Python's (the divisor's); x mod 0 is 0
                    // for integers, as numpy's.
                    "Mod" if attr_i(node, "fmod", 0) != 0 && int_div => {
                        Box::new(|x: f64, y: f64| if y == 0.0 { 0.0 } else { x % y })
                    }
                    "Mod" if attr_i(node, "fmod", 0) != 0 => Box::new(|x: f64, y: f64| x % y),
                    "Mod" if int_div => Box::new(|x: f64, y: f64| if y == 0.0 { 0.0 } else { x - y * (x / y).floor() }),
                    // (Python's float remainder, opset 22's fmod=0 of floats,
                    // as numpy's: C's moved by the divisor where the signs
                    // differ, so -3 mod inf is inf; by 0, NaN.)
                    "Mod" => Box::new(|x: f64, y: f64| {
                        let r = x % y;
                        // (A zero takes the divisor's sign, as numpy's.)
                        if r == 0.0 {
                            0.0f64.copysign(y)
                        } else if (r < 0.0) != (y < 0.0) {
                            r + y
                        } else {
                            r
                        }
                    }),
                    "Add" => Box::new(|x, y| x + y),
                    "Sub" => Box::new(|x, y| x - y),
                    "Mul" => Box::new(|x, y| x * y),
                    "Div" if int_div => Box::new(|x: f64, y: f64| if y == 0.0 { 0.0 } else { (x / y).trunc() }),
                    "Div" => Box::new(|x, y| x / y),
                    "Pow" => Box::new(f64::powf),
                    "Max" => Box::new(nan_max),
                    "Min" => Box::new(nan_min),
                    "Equal" => Box::new(|x, y| (x == y) as i32 as f64),
                    "Less" => Box::new(|x, y| (x < y) as i32 as f64),
                    "LessOrEqual" => Box::new(|x, y| (x <= y) as i32 as f64),
                    "GreaterOrEqual" => Box::new(|x, y| (x >= y) as i32 as f64),
                    "And" => Box::new(|x, y| (x != 0.0 && y != 0.0) as i32 as f64),
                    "Or" => Box::new(|x, y| (x != 0.0 || y != 0.0) as i32 as f64),
                    "Xor" => Box::new(|x, y| ((x != 0.0) != (y != 0.0)) as i32 as f64),
                    _ => Box::new(|x, y| (x > y) as i32 as f64),
                };
                let mut c = fold_binary(&a, &b, f)?;
                if matches!(op, "Equal" | "Less" | "Greater" | "LessOrEqual" | "GreaterOrEqual" | "And" | "Or" | "Xor")
                {
                    c.float = false;
                }
                Ok(vec![V::C(c)])
            }
            // Floats: C's remainder (fmod=1, `torch.fmod`), x - y trunc(x /
            // y), trunc as floor above 0 and ceil below, and x itself where
            // the quotient truncates to 0 (so 3 fmod inf is 3, not inf 0);
            // or Python's (fmod=0, `torch.remainder`), numpy's way: C's
            // remainder plus y where the two differ in sign (-3 mod inf is
            // inf). Gradients 1 and -trunc (or -floor) of x / y, as
            // PyTorch's.
            "Mod" => {
                let (a, b) = pair(self)?;
                if !a.dtype().is_float() {
                    return Err("Mod of computed integer tensors is not supported (of constants, it is folded)".into());
                }
                let q = nn(a.div(&b))?;
                let zero = nn(q.scalar(0.0))?;
                let below = nn(q.compare(Compare::Lt, &zero))?;
                let whole = nn(Tensor::select(&below, &nn(q.ceil())?, &nn(q.floor())?))?;
                let none = nn(whole.compare(Compare::Eq, &zero))?;
                let f = nn(a.sub(&nn(Tensor::select(&none, &whole, &nn(whole.mul(&b))?))?))?;
                if attr_i(node, "fmod", 0) != 0 {
                    return one(f);
                }
                let moved = nn(f.add(&b))?;
                let b_below = nn(b.compare(Compare::Lt, &zero))?;
                let b_not_below = nn(b.compare(Compare::Ge, &zero))?;
                let f_above = nn(f.compare(Compare::Gt, &zero))?;
                let f_below = nn(f.compare(Compare::Lt, &zero))?;
                let above_case = nn(Tensor::select(&b_below, &moved, &f))?;
                let below_case = nn(Tensor::select(&b_not_below, &moved, &f))?;
                one(nn(Tensor::select(&f_below, &below_case, &nn(Tensor::select(&f_above, &above_case, &f))?))?)
            }
            "Add" | "Sub" | "Mul" | "Div" | "Pow" => {
                // Adding constant zeros that do not widen the tensor is the
                // tensor: an attention mask of all-ones (Hugging Face's
                // `(1 - mask) * min`, folded to -0.0) would otherwise stand
                // between the scores and the softmax (no fused attention).
                let zeros = |v: &V| matches!(v, V::C(c) if c.float && c.vals.iter().all(|&x| x == 0.0));
                let through = match (op, input(0)?, input(1)?) {
                    ("Add", V::T(x), c) | ("Add", c, V::T(x)) | ("Sub", V::T(x), c) if zeros(c) => Some((x, c)),
                    _ => None,
                };
                if let Some((x, c)) = through
                    && x.dtype().is_float()
                    && broadcast(x.shape(), &shape_of(c))? == x.shape()
                {
                    return one(x.clone());
                }
                let (a, b) = match self.batch_operand(node, ins)? {
                    Some(ab) => ab,
                    None => pair(self)?,
                };
                if op == "Div" && !a.dtype().is_float() {
                    return Err("integer division of computed tensors is not supported".into());
                }
                let y = nn(match op {
                    "Add" => a.add(&b),
                    "Sub" => a.sub(&b),
                    "Mul" => a.mul(&b),
                    "Div" => a.div(&b),
                    _ => a.pow(&b),
                })?;
                // A straight-through estimator, `x + (round(x) - x).detach()`
                // or `b + h - h.detach()`: the export keeps no `detach`, and
                // as written the gradients cancelled (the layers before it
                // never trained); the detached part passes none.
                if op == "Sub" && self.straight_through(node) {
                    return one(nn(y.detach())?);
                }
                if op == "Sub" && self.straight_through_subtrahend(node) {
                    return one(nn(a.sub(&nn(b.detach())?))?);
                }
                one(y)
            }
            "Max" | "Min" => {
                let mut acc = t(0)?;
                for k in 1..ins.len() {
                    let b = self.tensor(g, input(k)?, Some(acc.dtype()))?;
                    acc = nn(if op == "Max" { acc.maximum(&b) } else { acc.minimum(&b) })?;
                }
                one(acc)
            }
            "Equal" | "Less" | "Greater" | "LessOrEqual" | "GreaterOrEqual" => {
                let (a, b) = pair(self)?;
                let p = match op {
                    "Equal" => Compare::Eq,
                    "Less" => Compare::Lt,
                    "LessOrEqual" => Compare::Le,
                    "GreaterOrEqual" => Compare::Ge,
                    _ => Compare::Gt,
                };
                one(nn(a.compare(p, &b))?)
            }
            // Booleans (i1), as 0/1 in f32 (hl's select and arithmetic take
            // no i1): a and b = a * b != 0; a or b = a + b != 0; a xor b =
            // a != b.
            "And" | "Or" | "Xor" => {
                let a = self.tensor(g, input(0)?, Some(DType::I1))?;
                let b = self.tensor(g, input(1)?, Some(DType::I1))?;
                if a.dtype() != DType::I1 || b.dtype() != DType::I1 {
                    return Err(format!("{op} takes booleans; got {} and {}", a.spec(), b.spec()));
                }
                let shape = broadcast(a.shape(), b.shape())?;
                // (Of one rank, the product broadcasts them: spread to the
                // whole shape first, a constant's spread fixed the batch.)
                let fit = |v: Tensor| -> R<Tensor> {
                    if v.shape() == shape.as_slice() {
                        Ok(v)
                    } else if v.rank() == shape.len() {
                        Ok(v)
                    } else {
                        nn(v.broadcast_to(&shape))
                    }
                };
                let (a, b) = (nn(fit(a)?.cast(DType::F32))?, nn(fit(b)?.cast(DType::F32))?);
                let combined = match op {
                    "And" => nn(a.mul(&b))?,
                    "Or" => nn(a.add(&b))?,
                    _ => nn(a.sub(&b))?,
                };
                let zero = nn(g.constant(&[0.0], &TensorSpec::new(combined.shape(), DType::F32)))?;
                one(nn(combined.compare(Compare::Ne, &zero))?)
            }
            // Index arithmetic on constants (a mask's positions): folded.
            "GatherND" | "GatherElements" => match (input(0)?, input(1)?) {
                (V::C(data), V::C(indices)) => Ok(vec![V::C(if op == "GatherND" {
                    gather_nd(data, indices, attr_i(node, "batch_dims", 0))?
                } else {
                    gather_elements(data, indices, attr_i(node, "axis", 0))?
                })]),
                // Every element of the data in order, each by its whole
                // index (Hugging Face's `mask[arange(B)[:, None], arange(S)]`
                // from the dynamo exporter, its indices folded at the
                // export's batch): the data reshaped to the indices' shape,
                // which a smaller batch then reshapes too.
                (V::T(x), V::C(i))
                    if op == "GatherND"
                        && attr_i(node, "batch_dims", 0) == 0
                        && node.input.first().is_some_and(|n| !self.inits.contains_key(n))
                        && enumerates_in_order(i, x.shape()) =>
                {
                    reshape_v(self, g, &V::T(x.clone()), &i.dims[..i.dims.len() - 1])
                }
                (data, indices) => {
                    if op == "GatherND" {
                        one(self.gather_nd(g, data, indices, attr_i(node, "batch_dims", 0))?)
                    } else {
                        one(self.gather_elements(g, data, indices, attr_i(node, "axis", 0))?)
                    }
                }
            },
            // Of constants (a position table written slice by slice in
            // forward, `pe[:, 0::2] = sin(..)`, as a TorchScript export
            // leaves it): folded.
            "ScatterND" => match (input(0)?, input(1)?, input(2)?) {
                (V::C(data), V::C(indices), V::C(updates)) => {
                    let reduction = attr_s(node, "reduction").unwrap_or_else(|| "none".into());
                    Ok(vec![V::C(scatter_nd(data, indices, updates, &reduction)?)])
                }
                // Into a computed tensor (zeros of a shape read from the
                // input), constant updates at constant places: placed into
                // a constant of the tensor's shape and combined with it
                // where they write (replaced, added, multiplied, or the
                // larger or smaller taken), the gradient passing where the
                // tensor's values survive.
                (V::T(x), V::C(indices), V::C(updates)) => {
                    let reduction = attr_s(node, "reduction").unwrap_or_else(|| "none".into());
                    if !x.dtype().is_float() && matches!(reduction.as_str(), "max" | "min") {
                        return Err(format!("ScatterND with reduction '{reduction}' into integers is not supported"));
                    }
                    let dims = x.shape().to_vec();
                    let n = numel(&dims)?;
                    let base = |v: f64| Const { dims: dims.clone(), vals: vec![v; n], float: true };
                    let start = match reduction.as_str() {
                        "none" | "add" => 0.0,
                        "mul" => 1.0,
                        "max" => f64::NEG_INFINITY,
                        "min" => f64::INFINITY,
                        other => return Err(format!("ScatterND's reduction '{other}' is not one ONNX defines")),
                    };
                    let placed = scatter_nd(&base(start), indices, updates, &reduction)?;
                    let placed = self.materialize(g, &placed, Some(x.dtype()))?;
                    let ones = Const { vals: vec![1.0; updates.vals.len()], ..updates.clone() };
                    let written = scatter_nd(&Const { float: false, ..base(0.0) }, indices, &ones, "none")?;
                    let mask = self.materialize(g, &written, Some(DType::I1))?;
                    one(nn(match reduction.as_str() {
                        "add" => x.add(&placed),
                        "mul" => x.mul(&placed),
                        "max" => x.maximum(&placed).and_then(|m| Tensor::select(&mask, &m, x)),
                        "min" => x.minimum(&placed).and_then(|m| Tensor::select(&mask, &m, x)),
                        _ => Tensor::select(&mask, &placed, x),
                    })?)
                }
                // Places or updates the model computes (`index_add`,
                // `index_put`): the rows the tuples name, written as
                // ScatterElements' are.
                (data, indices, updates) => {
                    let reduction = attr_s(node, "reduction").unwrap_or_else(|| "none".into());
                    let (at, view) = self.nd_positions(g, indices, &shape_of(data), 0, "ScatterND")?;
                    let mut want = at.shape().to_vec();
                    want.extend(&view[1..]);
                    if shape_of(updates) != want {
                        return Err(format!(
                            "ScatterND's updates {:?} are not of the shape its indices give ({want:?})",
                            shape_of(updates)
                        ));
                    }
                    one(self.scatter_into(g, data, &at, updates, &view, &reduction, "ScatterND")?)
                }
            },
            "ScatterElements" => {
                let reduction = attr_s(node, "reduction").unwrap_or_else(|| "none".into());
                let axis = attr_i(node, "axis", 0);
                match (input(0)?, input(1)?, input(2)?) {
                    (V::C(data), V::C(indices), V::C(updates)) => {
                        Ok(vec![V::C(scatter_elements(data, indices, updates, axis, &reduction)?)])
                    }
                    // Constant updates at constant places combined with a
                    // computed tensor by a product, maximum or minimum: as
                    // ScatterND's (placed into a constant, then combined
                    // where they write).
                    (V::T(x), V::C(indices), V::C(updates)) if matches!(reduction.as_str(), "mul" | "max" | "min") => {
                        if !x.dtype().is_float() && reduction != "mul" {
                            return Err(format!(
                                "ScatterElements with reduction '{reduction}' into integers is not supported"
                            ));
                        }
                        let dims = x.shape().to_vec();
                        let n = numel(&dims)?;
                        let start = match reduction.as_str() {
                            "mul" => 1.0,
                            "max" => f64::NEG_INFINITY,
                            _ => f64::INFINITY,
                        };
                        let base = |v: f64| Const { dims: dims.clone(), vals: vec![v; n], float: true };
                        let placed = scatter_elements(&base(start), indices, updates, axis, &reduction)?;
                        let placed = self.materialize(g, &placed, Some(x.dtype()))?;
                        let ones = Const { vals: vec![1.0; updates.vals.len()], ..updates.clone() };
                        let written =
                            scatter_elements(&Const { float: false, ..base(0.0) }, indices, &ones, axis, "none")?;
                        let mask = self.materialize(g, &written, Some(DType::I1))?;
                        one(nn(match reduction.as_str() {
                            "mul" => x.mul(&placed),
                            "max" => x.maximum(&placed).and_then(|m| Tensor::select(&mask, &m, x)),
                            _ => x.minimum(&placed).and_then(|m| Tensor::select(&mask, &m, x)),
                        })?)
                    }
                    (data, indices, updates) => {
                        one(self.scatter_elements(g, data, indices, updates, axis, &reduction)?)
                    }
                }
            }
            "Where" => {
                if let (V::C(c), V::C(x), V::C(y)) = (input(0)?, input(1)?, input(2)?) {
                    let dims = broadcast(&broadcast(&c.dims, &x.dims)?, &y.dims)?;
                    let n = numel(&dims)?;
                    let vals = (0..n)
                        .map(|i| {
                            let pick = c.vals[broadcast_index(i, &dims, &c.dims)] != 0.0;
                            if pick {
                                x.vals[broadcast_index(i, &dims, &x.dims)]
                            } else {
                                y.vals[broadcast_index(i, &dims, &y.dims)]
                            }
                        })
                        .collect();
                    return Ok(vec![V::C(Const { dims, vals, float: x.float })]);
                }
                let dtype = match (input(1)?, input(2)?) {
                    (V::T(x), _) | (_, V::T(x)) => Some(x.dtype()),
                    _ => None,
                };
                let c = self.tensor(g, input(0)?, Some(DType::I1))?;
                let (x, y) = (self.tensor(g, input(1)?, dtype)?, self.tensor(g, input(2)?, dtype)?);
                let shape = broadcast(&broadcast(c.shape(), x.shape())?, y.shape())?;
                let fit = |v: Tensor| -> R<Tensor> {
                    if v.shape() == shape.as_slice() { Ok(v) } else { nn(v.broadcast_to(&shape)) }
                };
                one(nn(Tensor::select(&fit(c)?, &fit(x)?, &fit(y)?))?)
            }
            // PyTorch's exported SDPA with a boolean mask zeroes the
            // probabilities of fully masked rows: Where(IsNaN(p), 0, p).
            "IsNaN" | "IsInf" => {
                let (negative, positive) = if op == "IsInf" {
                    (attr_i(node, "detect_negative", 1) != 0, attr_i(node, "detect_positive", 1) != 0)
                } else {
                    (false, false)
                };
                let test = |v: f64| {
                    if op == "IsNaN" {
                        v.is_nan()
                    } else {
                        (negative && v == f64::NEG_INFINITY) || (positive && v == f64::INFINITY)
                    }
                };
                match input(0)? {
                    V::C(c) => {
                        let vals = c.vals.iter().map(|&v| test(v) as i32 as f64).collect();
                        Ok(vec![V::C(Const { dims: c.dims.clone(), vals, float: false })])
                    }
                    // x != x only for NaN (hl's ne is unordered).
                    V::T(x) if op == "IsNaN" => one(nn(x.compare(Compare::Ne, &x))?),
                    V::T(x) => {
                        let (value, of) = match (negative, positive) {
                            (true, true) => (f64::INFINITY, nn(x.abs())?),
                            (true, false) => (f64::NEG_INFINITY, x.clone()),
                            (false, true) => (f64::INFINITY, x.clone()),
                            // Neither: no element is (an ordered compare
                            // with NaN is false everywhere).
                            (false, false) => (f64::NAN, x.clone()),
                        };
                        let bound = nn(g.constant(&[value], &TensorSpec::new(of.shape(), of.dtype())))?;
                        one(nn(of.compare(Compare::Eq, &bound))?)
                    }
                }
            }
            "Not" => match input(0)? {
                V::C(c) => {
                    let vals = c.vals.iter().map(|&v| (v == 0.0) as i32 as f64).collect();
                    Ok(vec![V::C(Const { dims: c.dims.clone(), vals, float: false })])
                }
                V::T(x) => {
                    // A computed boolean (`~mask`) compares as a float, as
                    // And/Or/Xor do: hl's compare takes no i1.
                    let x = if x.dtype() == DType::I1 { nn(x.cast(DType::F32))? } else { x.clone() };
                    let zero = nn(g.constant(&[0.0], &TensorSpec::new(x.shape(), x.dtype())))?;
                    one(nn(x.compare(Compare::Eq, &zero))?)
                }
            },
            "Trilu" => {
                let dims = shape_of(input(0)?);
                if dims.len() < 2 {
                    return Err(format!("Trilu of rank {} (at least 2)", dims.len()));
                }
                let k = match optional_const(1)? {
                    Some(c) => first(&c, "k")? as i64,
                    None => 0,
                };
                let upper = attr_i(node, "upper", 1) != 0;
                let (rows, cols) = (dims[dims.len() - 2], dims[dims.len() - 1]);
                // Which elements of a [rows, cols] matrix are kept.
                let keep = |i: usize, j: usize| {
                    let d = j as i64 - i as i64;
                    if upper { d >= k } else { d <= k }
                };
                match input(0)? {
                    V::C(c) => {
                        let vals = c
                            .vals
                            .iter()
                            .enumerate()
                            .map(|(n, &v)| if keep((n / cols) % rows, n % cols) { v } else { 0.0 })
                            .collect();
                        Ok(vec![V::C(Const { dims, vals, float: c.float })])
                    }
                    V::T(x) => {
                        let mask: Vec<f64> = (0..rows * cols).map(|n| keep(n / cols, n % cols) as i32 as f64).collect();
                        let m = nn(g.constant(&mask, &TensorSpec::new([rows, cols], DType::I1)))?;
                        let m = nn(m.broadcast_to(x.shape()))?;
                        let zero = nn(g.constant(&[0.0], &TensorSpec::new(x.shape(), x.dtype())))?;
                        one(nn(Tensor::select(&m, x, &zero))?)
                    }
                }
            }
            "Neg" if all_const => {
                let mut c = konst(0, "x")?;
                c.vals.iter_mut().for_each(|v| *v = -*v);
                Ok(vec![V::C(c)])
            }
            // A float function of a float constant (index and table
            // arithmetic a TorchScript export leaves: `1 / x` of a Range's
            // bound, a position table's sin): folded, as Neg is.
            _ if all_const && unary_fold(op).is_some() && matches!(input(0)?, V::C(c) if c.float) => {
                let mut c = konst(0, "x")?;
                let f = unary_fold(op).ok_or("no folding function")?;
                c.vals.iter_mut().for_each(|v| *v = f(*v));
                Ok(vec![V::C(c)])
            }
            // Composed of exp, sin and cos.
            "Sinh" | "Cosh" => {
                let x = t(0)?;
                let (up, down) = (nn(x.exp())?, nn(x.neg().and_then(|n| n.exp()))?);
                one(nn(if op == "Sinh" { up.sub(&down) } else { up.add(&down) }.and_then(|v| v.mul_scalar(0.5)))?)
            }
            "Tan" => {
                let x = t(0)?;
                one(nn(x.sin().and_then(|s| x.cos().and_then(|c| s.div(&c))))?)
            }
            "Sin" | "Cos" | "Floor" | "Ceil" | "Round" | "Atan" => {
                let x = t(0)?;
                one(nn(match op {
                    "Sin" => x.sin(),
                    "Atan" => x.atan(),
                    "Cos" => x.cos(),
                    "Floor" => x.floor(),
                    "Ceil" => x.ceil(),
                    _ => x.round(),
                })?)
            }
            "Sqrt" | "Erf" | "Exp" | "Log" | "Neg" | "Abs" | "Relu" | "Sigmoid" | "Tanh" | "Reciprocal" => {
                let x = t(0)?;
                one(nn(match op {
                    "Sqrt" => x.sqrt(),
                    "Erf" => x.erf(),
                    "Exp" => x.exp(),
                    "Log" => x.log(),
                    "Neg" => x.neg(),
                    "Abs" => x.abs(),
                    "Relu" => x.relu(),
                    "Sigmoid" => x.sigmoid(),
                    "Tanh" => x.tanh(),
                    _ => x.scalar(1.0).and_then(|one| one.div(&x)),
                })?)
            }
            "RNN" | "GRU" | "LSTM" => self.recurrent(g, node, ins),
            "Attention" => self.attention(g, node, ins),
            "RotaryEmbedding" => one(self.rotary_embedding(g, node, ins)?),
            "Gelu" => {
                let approx = match attr_s(node, "approximate").as_deref() {
                    None | Some("none") => GeluApproximation::None,
                    Some("tanh") => GeluApproximation::Tanh,
                    Some(other) => return Err(format!("approximate='{other}' is not supported")),
                };
                one(nn(t(0)?.gelu(approx))?)
            }
            // Swish (opset 24; what `onnx_fold` makes of `x * sigmoid(x)`):
            // x * sigmoid(alpha x); alpha 1 is SiLU, one op.
            "Swish" => {
                let x = t(0)?;
                let alpha = attr_f(node, "alpha", 1.0) as f64;
                one(nn(if alpha == 1.0 {
                    x.silu()
                } else {
                    x.mul_scalar(alpha).and_then(|a| a.sigmoid()).and_then(|s| x.mul(&s))
                })?)
            }
            "Softplus" | "Softsign" | "Mish" => {
                let x = t(0)?;
                // softplus(x) = max(x, 0) + log(1 + e^-|x|): no overflow.
                let softplus = |x: &Tensor| {
                    x.abs()
                        .and_then(|a| a.neg())
                        .and_then(|a| a.exp())
                        .and_then(|e| e.add_scalar(1.0))
                        .and_then(|e| e.log())
                        .and_then(|l| x.relu().and_then(|r| r.add(&l)))
                };
                one(nn(match op {
                    "Softplus" => softplus(&x),
                    "Mish" => softplus(&x).and_then(|s| s.tanh()).and_then(|t| x.mul(&t)),
                    _ => x.abs().and_then(|a| a.add_scalar(1.0)).and_then(|d| x.div(&d)),
                })?)
            }
            "Selu" | "Celu" => {
                let x = t(0)?;
                let zero = nn(x.scalar(0.0).and_then(|z| z.broadcast_to(x.shape())))?;
                let pos = nn(x.compare(Compare::Gt, &zero))?;
                // The negative branch from e^min(x, 0) (finite where not
                // taken): selu's gamma (x if x > 0 else alpha (e^x - 1)),
                // celu's max(0, x) + min(0, alpha (e^(x / alpha) - 1)).
                let (alpha, gamma, inner) = if op == "Selu" {
                    (
                        attr_f(node, "alpha", 1.673_263_192_176_818_8) as f64,
                        attr_f(node, "gamma", 1.050_701_022_148_132_3) as f64,
                        1.0,
                    )
                } else {
                    let a = attr_f(node, "alpha", 1.0) as f64;
                    (a, 1.0, 1.0 / a)
                };
                let neg = nn(x
                    .minimum(&zero)
                    .and_then(|m| m.mul_scalar(inner))
                    .and_then(|m| m.exp())
                    .and_then(|e| e.add_scalar(-1.0))
                    .and_then(|e| e.mul_scalar(alpha)))?;
                let y = nn(Tensor::select(&pos, &x, &neg))?;
                one(if gamma == 1.0 { y } else { nn(y.mul_scalar(gamma))? })
            }
            "Sign" => {
                let x = t(0)?;
                let zero = nn(x.scalar(0.0).and_then(|z| z.broadcast_to(x.shape())))?;
                let pos = nn(x.compare(Compare::Gt, &zero))?;
                let negative = nn(x.compare(Compare::Lt, &zero))?;
                let minus = nn(x.scalar(-1.0))?;
                let plus = nn(x.scalar(1.0))?;
                let lower = nn(Tensor::select(&negative, &minus, &zero))?;
                one(nn(Tensor::select(&pos, &plus, &lower))?)
            }
            // The k largest (or smallest) along an axis, in order, the
            // lower index first among equals: k rounds of an ArgMax, each
            // value gathered from the input (so the gradient reaches the
            // chosen elements: a mixture of experts' gate) and its place
            // masked out for the next round.
            "TopK" => {
                let ks = konst(1, "TopK's k")?.as_ints();
                let dims = shape_of(input(0)?);
                let a = norm_axis(attr_i(node, "axis", -1), dims.len())?;
                let largest = attr_i(node, "largest", 1) != 0;
                let (n, k) = (dims[a], ks.first().copied().unwrap_or(0));
                if ks.len() != 1 || k < 1 || k as usize > n {
                    return Err(format!("k {ks:?}: one number in [1, {n}] (the axis' size)"));
                }
                let k = k as usize;
                if let V::C(c) = input(0)? {
                    let (values, indices) = top_k(c, a, k, largest);
                    return Ok(vec![V::C(values), V::C(indices)]);
                }
                if k > 64 {
                    return Err(format!("k {k} of a computed tensor: at most 64 (each is a pass over the axis)"));
                }
                let x = t(0)?;
                // Each round takes the first place still left whose value
                // is the largest of those left: the places taken are kept
                // apart (`left`, 1 where a place is left), not masked by a
                // value, which an input's own -inf would equal (its place
                // was then taken twice).
                let least = match x.dtype() {
                    d if d.is_float() => f64::NEG_INFINITY,
                    DType::I32 => i32::MIN as f64,
                    d => return Err(format!("TopK of a computed {d:?} tensor: floats and i32")),
                };
                let work = if largest { x.clone() } else { nn(x.neg())? };
                let mut place = vec![1; dims.len()];
                place[a] = n;
                let iota: Vec<f64> = (0..n).map(|i| i as f64).collect();
                let iota = nn(nn(g.constant(&iota, &TensorSpec::new(place, DType::I32)))?.broadcast_to(&dims))?;
                let gone = nn(g.constant(&[least], &TensorSpec::new(dims.clone(), x.dtype())))?;
                let flags = TensorSpec::new(dims.clone(), DType::F32);
                let zero = nn(g.constant(&[0.0], &flags))?;
                let mut left = nn(g.constant(&[1.0], &flags))?;
                let (mut values, mut indices) = (Vec::new(), Vec::new());
                for round in 0..k {
                    let available = nn(left.compare(Compare::Gt, &zero))?;
                    // The largest value left, read where an argmax finds it
                    // (a reduction takes floats only; an argmax integers too).
                    let masked = nn(Tensor::select(&available, &work, &gone))?;
                    let mut at = nn(masked.argmax(a as i64, true))?;
                    if at.dtype() != DType::I32 {
                        at = nn(at.cast(DType::I32))?;
                    }
                    let best = self.gather_elements(g, &V::T(masked), &V::T(at), a as i64)?;
                    let equal = nn(work.compare(Compare::Eq, &nn(best.broadcast_to(&dims))?))?;
                    let candidates = nn(Tensor::select(&equal, &left, &zero))?;
                    let mut i = nn(candidates.argmax(a as i64, true))?;
                    if i.dtype() != DType::I32 {
                        i = nn(i.cast(DType::I32))?;
                    }
                    values.push(self.gather_elements(g, &V::T(x.clone()), &V::T(i.clone()), a as i64)?);
                    if round + 1 < k {
                        let hit = nn(iota.compare(Compare::Eq, &nn(i.broadcast_to(&dims))?))?;
                        left = nn(Tensor::select(&hit, &zero, &left))?;
                    }
                    indices.push(i);
                }
                let join = |parts: &[Tensor]| -> R<Tensor> {
                    if parts.len() == 1 {
                        Ok(parts[0].clone())
                    } else {
                        nn(Tensor::concat(&parts.iter().collect::<Vec<_>>(), a as i64))
                    }
                };
                Ok(vec![V::T(join(&values)?), V::T(join(&indices)?)])
            }
            "ArgMax" => {
                if attr_i(node, "select_last_index", 0) != 0 {
                    return Err("select_last_index=1 (the last of equal maxima): AICF's argmax takes the first".into());
                }
                let x = t(0)?;
                let axis = norm_axis(attr_i(node, "axis", 0), x.rank())? as i64;
                // (As i32, as the importer holds ONNX's int64 ids and labels:
                // `where(p > 2, p, y)` of an ArgMax and labels.)
                one(nn(x.argmax(axis, attr_i(node, "keepdims", 1) != 0).and_then(|i| i.cast(DType::I32)))?)
            }
            "Elu" => {
                let x = t(0)?;
                let alpha = attr_f(node, "alpha", 1.0) as f64;
                // x if x > 0 else alpha (e^x - 1).
                let zero = nn(x.scalar(0.0).and_then(|z| z.broadcast_to(x.shape())))?;
                let pos = nn(x.compare(Compare::Gt, &zero))?;
                // e^min(x, 0): the branch not taken stays finite (e^x of a
                // large x overflowed, and its zero gradient times inf was NaN).
                let neg = nn(x
                    .minimum(&zero)
                    .and_then(|m| m.exp())
                    .and_then(|e| e.add_scalar(-1.0))
                    .and_then(|e| e.mul_scalar(alpha)))?;
                one(nn(Tensor::select(&pos, &x, &neg))?)
            }
            // x if x >= 0 else slope x, the slope (a learned parameter in
            // PyTorch's nn.PReLU: [C], [C, 1, 1] or one) broadcast to x.
            "PRelu" => {
                let x = t(0)?;
                let slope = self.tensor(g, input(1)?, Some(x.dtype()))?;
                let zero = nn(x.scalar(0.0).and_then(|z| z.broadcast_to(x.shape())))?;
                let pos = nn(x.compare(Compare::Ge, &zero))?;
                let scaled = nn(x.mul(&slope))?;
                if scaled.shape() != x.shape() {
                    return Err(format!(
                        "slope of shape {:?} does not broadcast to the input's {:?}",
                        slope.shape(),
                        x.shape()
                    ));
                }
                one(nn(Tensor::select(&pos, &x, &scaled))?)
            }
            // Running sums along `axis` (exclusive: without the element
            // itself; reverse: from the end). Of a traced tensor, a product
            // with a triangular matrix of ones along that axis (one GEMM,
            // differentiable); of a constant, folded.
            "CumSum" => {
                let dims = shape_of(input(0)?);
                let rank = dims.len() as i64;
                let given = first(&konst(1, "axis")?, "axis")? as i64;
                let axis = if given < 0 { given + rank } else { given };
                if axis < 0 || axis >= rank {
                    return Err(format!("axis {given} is out of range for rank {rank}"));
                }
                let axis = axis as usize;
                let (exclusive, reverse) = (attr_i(node, "exclusive", 0) != 0, attr_i(node, "reverse", 0) != 0);
                // Whether output j along the axis sums input i.
                let takes = |i: usize, j: usize| match (reverse, exclusive) {
                    (false, false) => i <= j,
                    (false, true) => i < j,
                    (true, false) => i >= j,
                    (true, true) => i > j,
                };
                let n = dims[axis];
                let inner: usize = dims[axis + 1..].iter().product();
                match input(0)? {
                    V::C(c) => {
                        let mut vals = vec![0.0; c.vals.len()];
                        for (at, v) in vals.iter_mut().enumerate() {
                            let (j, base) = ((at / inner) % n, at - ((at / inner) % n) * inner);
                            *v = (0..n).filter(|&i| takes(i, j)).map(|i| c.vals[base + i * inner]).sum();
                        }
                        Ok(vec![V::C(Const { dims, vals, float: c.float })])
                    }
                    V::T(x) => {
                        if !x.dtype().is_float() {
                            return Err(format!(
                                "CumSum of {:?} values the model computes (only constants' sums fold; a float \
                                 input runs as a product); Hugging Face's RoBERTa-style models count positions so \
                                 from the ids: export them with position_ids given as an input",
                                x.dtype()
                            ));
                        }
                        // n x n ones: past this, a scan kernel would be the way.
                        const MOST: usize = 8192;
                        if n > MOST {
                            return Err(format!("CumSum along an axis of {n} (at most {MOST})"));
                        }
                        let last = dims.len() - 1;
                        let mut perm: Vec<i64> = (0..dims.len() as i64).collect();
                        perm.swap(axis, last);
                        let moved = if axis == last { x.clone() } else { nn(x.permute(&perm))? };
                        let rows: usize = moved.shape()[..last].iter().product();
                        let flat = nn(moved.reshape(&[rows as i64, n as i64]))?;
                        let ones: Vec<f64> = (0..n * n).map(|k| takes(k / n, k % n) as i32 as f64).collect();
                        let u = nn(g.constant(&ones, &TensorSpec::new([n, n], x.dtype())))?;
                        let summed = nn(flat.matmul(&u))?;
                        let back: Vec<i64> = moved.shape().iter().map(|&d| d as i64).collect();
                        let y = nn(summed.reshape(&back))?;
                        one(if axis == last { y } else { nn(y.permute(&perm))? })
                    }
                }
            }
            "LeakyRelu" => {
                let x = t(0)?;
                let alpha = attr_f(node, "alpha", 0.01) as f64;
                // x if x >= 0 else alpha x.
                let zero = nn(x.scalar(0.0).and_then(|z| z.broadcast_to(x.shape())))?;
                let pos = nn(x.compare(Compare::Ge, &zero))?;
                let scaled = nn(x.mul_scalar(alpha))?;
                one(nn(Tensor::select(&pos, &x, &scaled))?)
            }
            "HardSigmoid" | "HardSwish" => {
                let x = t(0)?;
                let (alpha, beta) = if op == "HardSwish" {
                    (1.0 / 6.0, 0.5)
                } else {
                    (attr_f(node, "alpha", 0.2) as f64, attr_f(node, "beta", 0.5) as f64)
                };
                let h = nn(x.mul_scalar(alpha).and_then(|y| y.add_scalar(beta)))?;
                let h = nn(h.scalar(0.0).and_then(|z| h.maximum(&z)))?;
                let h = nn(h.scalar(1.0).and_then(|o| h.minimum(&o)))?;
                one(if op == "HardSwish" { nn(x.mul(&h))? } else { h })
            }
            "Clip" => {
                let x = t(0)?;
                let (lo, hi) = if self.opset < 11 {
                    (Some(attr_f(node, "min", f32::MIN) as f64), Some(attr_f(node, "max", f32::MAX) as f64))
                } else {
                    let bound = |k: usize, what: &str| optional_const(k)?.map(|c| first(&c, what)).transpose();
                    (bound(1, "min")?, bound(2, "max")?)
                };
                let mut y = x;
                if let Some(lo) = lo {
                    y = nn(y.scalar(lo).and_then(|c| y.maximum(&c)))?;
                }
                if let Some(hi) = hi {
                    y = nn(y.scalar(hi).and_then(|c| y.minimum(&c)))?;
                }
                one(y)
            }
            "Softmax" | "LogSoftmax" => {
                let x = t(0)?;
                let default = if self.opset >= 13 { -1 } else { 1 };
                let axis = norm_axis(attr_i(node, "axis", default), x.rank())?;
                if self.opset < 13 && axis != x.rank() - 1 {
                    return Err(format!(
                        "before opset 13, {op} over axis {axis} flattens the trailing dimensions; only the last axis is supported"
                    ));
                }
                if op == "Softmax"
                    && axis + 1 == x.rank()
                    && node.output.first().is_some_and(|o| self.graph.output.first().is_some_and(|g| g.name() == o))
                {
                    self.softmax_logits = Some(x.clone());
                }
                one(nn(if op == "Softmax" { x.softmax(axis as i64) } else { x.log_softmax(axis as i64) })?)
            }
            "OneHot" => {
                // (`F.one_hot`: a comparison of the indices, negative ones
                // counted from the end, with each class.)
                let depth = first(&konst(1, "the depth")?, "the depth")?;
                if depth < 1.0 || depth.fract() != 0.0 || depth > (1u64 << 24) as f64 {
                    return Err(format!("depth {depth} is not a number of classes"));
                }
                let depth = depth as usize;
                let values = konst(2, "the values")?;
                let [off, on] = values.vals[..] else {
                    return Err(format!("the values hold {} numbers, not two (off, on)", values.vals.len()));
                };
                let idx = t(0)?;
                // (Float indices are cast to integers, as ONNX says.)
                let idx = if idx.dtype().is_float() { nn(idx.cast(DType::I32))? } else { idx };
                let axis = norm_axis(attr_i(node, "axis", -1), idx.rank() + 1)?;
                let n = nn(idx.scalar(depth as f64))?;
                let negative = nn(idx.scalar(0.0).and_then(|z| idx.compare(Compare::Lt, &z)))?;
                let wrapped = nn(idx.add(&n).and_then(|w| Tensor::select(&negative, &w, &idx)))?;
                let mut at: Vec<i64> = wrapped.shape().iter().map(|&d| d as i64).collect();
                at.insert(axis, 1);
                let column = nn(wrapped.reshape(&at))?;
                let mut along = vec![1i64; idx.rank() + 1];
                along[axis] = depth as i64;
                let classes = nn(g.arange(depth).and_then(|c| c.cast(idx.dtype())).and_then(|c| c.reshape(&along)))?;
                let hit = nn(column.compare(Compare::Eq, &classes))?;
                let float = values.float;
                let like = if float { nn(idx.scalar(0.0).and_then(|z| z.cast(DType::F32)))? } else { idx.clone() };
                let (on, off) = (nn(like.scalar(on))?, nn(like.scalar(off))?);
                let mut shape = wrapped.shape().to_vec();
                shape.insert(axis, depth);
                let hit = nn(hit.broadcast_to(&shape))?;
                one(nn(Tensor::select(&hit, &on, &off))?)
            }
            "SoftmaxCrossEntropyLoss" | "NegativeLogLikelihoodLoss" => {
                let scores = t(0)?;
                let labels = t(1)?;
                let r = scores.rank();
                if r < 2 {
                    return Err(format!("the scores {} have no class axis ([N, C, ...])", scores.spec()));
                }
                let mut want: Vec<usize> = scores.shape().to_vec();
                want.remove(1);
                if !matches!(labels.dtype(), DType::I32 | DType::I64) || labels.shape() != &want[..] {
                    return Err(format!(
                        "the labels {} are not class indices of the scores {} (integers of their shape without the \
                         class axis 1)",
                        labels.spec(),
                        scores.spec()
                    ));
                }
                let classes = scores.shape()[1];
                let weight = match ins.get(2).and_then(|v| v.as_ref()) {
                    None => None,
                    Some(v) => {
                        let w = self.tensor(g, v, Some(scores.dtype()))?;
                        if w.shape() != [classes] {
                            return Err(format!("the class weights {} are not one per class ({classes})", w.spec()));
                        }
                        Some(w)
                    }
                };
                let reduction = match attr_s(node, "reduction").as_deref().unwrap_or("mean") {
                    "mean" => Reduction::Mean,
                    "sum" => Reduction::Sum,
                    "none" => Reduction::None,
                    other => return Err(format!("reduction '{other}' is not one of none, sum, mean")),
                };
                let ignore = attr(node, "ignore_index").map(|a| a.i());
                // The dynamo exporter drops F.cross_entropy's
                // label_smoothing (ONNX's op has none); its metadata keeps it.
                let smoothing = if op == "SoftmaxCrossEntropyLoss" { label_smoothing(node)? } else { 0.0 };
                // Classes last, as `hl.cross_entropy` takes them.
                let last = if r > 2 {
                    let mut perm: Vec<i64> = vec![0];
                    perm.extend(2..r as i64);
                    perm.push(1);
                    nn(scores.permute(&perm))?
                } else {
                    scores.clone()
                };
                let loss = if op == "SoftmaxCrossEntropyLoss" && weight.is_none() {
                    nn(last.cross_entropy_smoothed(&labels, reduction, ignore, smoothing))?
                } else {
                    let log_p = if op == "SoftmaxCrossEntropyLoss" { nn(last.log_softmax(-1))? } else { last };
                    nn(nll_loss(&log_p, &labels, weight.as_ref(), reduction, ignore, smoothing))?
                };
                let mut outs = vec![V::T(loss)];
                if node.output.get(1).is_some_and(|o| !o.is_empty()) {
                    outs.push(V::T(nn(scores.log_softmax(1))?));
                }
                Ok(outs)
            }
            "BatchNormalization" => {
                let x = t(0)?;
                if x.rank() < 2 {
                    return Err(format!("the input {} has no channel dimension", x.spec()));
                }
                // A training-mode export's updated statistics are extra
                // outputs; unused, the node is the norm AICF trains anyway
                // (batch statistics and the running update in @loss).
                if attr_i(node, "training_mode", 0) != 0 && !self.trains {
                    return Err("training_mode=1 in a model imported to run forward only (--loss none): its @forward \
                                normalises with the running statistics, as in evaluation (import with a --loss to \
                                train it with batch statistics)"
                        .into());
                }
                if node.output.iter().skip(1).any(|o| !self.unused(o)) {
                    return Err("the running-statistics outputs are used by the graph, which AICF does not support: \
                                export the model in evaluation mode (AICF trains it with batch statistics in @loss)"
                        .into());
                }
                if self.opset < 9 && attr_i(node, "spatial", 1) == 0 {
                    return Err("spatial=0 is not supported".into());
                }
                let eps = epsilon(node)?;
                let momentum = attr_f(node, "momentum", 0.9) as f64;
                if !(0.0..=1.0).contains(&momentum) {
                    return Err(format!("momentum {momentum} must be in [0, 1]"));
                }
                let c = x.shape()[1];
                // The running statistics are model state when they are
                // initializers; computed ones (or graph inputs) serve
                // evaluation only.
                let running = match (node.input.get(3), node.input.get(4)) {
                    (Some(m), Some(v)) if self.states.contains(m) && self.states.contains(v) => {
                        match (self.names.get(m), self.names.get(v)) {
                            (Some(m), Some(v)) => Some((m.clone(), v.clone())),
                            _ => return Err("the running statistics were not declared".into()),
                        }
                    }
                    _ => None,
                };
                let vec = |k: usize| -> R<Tensor> { self.tensor(g, input(k)?, Some(DType::F32)) };
                let (scale, bias, rm, rv) = (vec(1)?, vec(2)?, vec(3)?, vec(4)?);
                for (what, v) in [("scale", &scale), ("bias", &bias), ("mean", &rm), ("var", &rv)] {
                    if v.shape() != [c] {
                        return Err(format!("{what} is {}, the input has {c} channels", v.spec()));
                    }
                }
                // [C] -> [1, C, 1, ...] to broadcast over the input.
                let mut per_channel: Vec<i64> = vec![1; x.rank()];
                per_channel[1] = c as i64;
                let channel = |v: &Tensor| nn(v.reshape(&per_channel));
                let (mean, var) = if g.is_training() {
                    let Some((mean_name, var_name)) = &running else {
                        // PyTorch's exporter keeps one initializer of equal
                        // values: a fresh norm's running statistics (zeros,
                        // ones) become Identity copies of its bias and weight.
                        let copied: Vec<String> = node
                            .input
                            .iter()
                            .skip(3)
                            .take(2)
                            .filter_map(|name| {
                                let from = self.graph.node.iter().find(|n| {
                                    n.op_type() == "Identity" && n.output.first().is_some_and(|o| o == name)
                                })?;
                                let source = from.input.first().filter(|i| self.inits.contains_key(*i))?;
                                Some(format!("'{name}' is an Identity of the initializer '{source}'"))
                            })
                            .collect();
                        if !copied.is_empty() {
                            return Err(format!(
                                "the running mean and variance must be initializers of their own to train; {} (the \
                                 exporter merges initializers of equal values, as in a freshly initialized model: \
                                 export it after training, or with its statistics differing from its parameters)",
                                copied.join(", ")
                            ));
                        }
                        // Statistics the graph computes (a dynamo export of
                        // `BatchNorm2d(track_running_stats=False)`: the
                        // batch's own mean and variance, as it normalises in
                        // training and evaluation alike) are used as
                        // given, their gradient through them; constants
                        // would train an evaluation-mode norm, refused.
                        let computed = |k: usize| {
                            matches!(ins.get(k).and_then(|v| v.as_ref()), Some(V::T(_)))
                                && node.input.get(k).is_some_and(|name| {
                                    self.graph.node.iter().any(|n| n.output.iter().any(|o| o == name))
                                })
                        };
                        if computed(3) && computed(4) {
                            let inv = nn(channel(&rv)?.add_scalar(eps).and_then(|v| v.rsqrt()))?;
                            let y = nn(x.sub(&channel(&rm)?).and_then(|d| d.mul(&inv)))?;
                            let (scale, bias) = (channel(&scale)?, channel(&bias)?);
                            return one(nn(y.mul(&scale).and_then(|y| y.add(&bias)))?);
                        }
                        return Err("the running mean and variance must be initializers to train (a norm that \
                                    keeps none, BatchNorm2d(track_running_stats=False), exports its batch \
                                    statistics computed: by dynamo=True)"
                            .into());
                    };
                    // Batch statistics (biased variance), and the running
                    // statistics' update as the exporting framework makes
                    // it: PyTorch's with the unbiased variance; the ONNX
                    // spec's (Keras's, Flax's: jax2onnx) with the biased
                    // one, as the batch normalizes by. Momentum m keeps m
                    // of the old value (ONNX's convention: PyTorch's 0.1 is
                    // 0.9).
                    let axes: Vec<i64> = (0..x.rank() as i64).filter(|&a| a != 1).collect();
                    let mean = nn(x.mean(&axes, true))?;
                    let centred = nn(x.sub(&mean))?;
                    let var = nn(centred.mul(&centred).and_then(|sq| sq.mean(&axes, true)))?;
                    let flat = |v: &Tensor| nn(v.reshape(&[c as i64]));
                    // Bessel's n / (n - 1) from the batch's own shape (x * 0
                    // + 1, summed), not a constant of the import batch: a
                    // model run at another batch (--batch, a smaller last
                    // batch) updated its running variance by the import's
                    // (0.1 * 96/95 where PyTorch's 1-row batch takes 16/15).
                    // Where a batch has one value per channel, 1.
                    let batch_var = if self.pytorch {
                        let ones = nn(x.mul_scalar(0.0).and_then(|z| z.add_scalar(1.0)))?;
                        let count = flat(&nn(ones.sum(&axes, true))?)?;
                        let one = nn(count.scalar(1.0))?;
                        let unbiased =
                            nn(count.add_scalar(-1.0).and_then(|d| d.maximum(&one)).and_then(|d| count.div(&d)))?;
                        nn(flat(&var)?.mul(&unbiased))?
                    } else {
                        flat(&var)?
                    };
                    let batch_mean = nn(flat(&mean)?.mul_scalar(1.0 - momentum))?;
                    let next_mean = nn(rm.mul_scalar(momentum).and_then(|a| a.add(&batch_mean)))?;
                    let batch_var = nn(batch_var.mul_scalar(1.0 - momentum))?;
                    let next_var = nn(rv.mul_scalar(momentum).and_then(|a| a.add(&batch_var)))?;
                    g.set_state(mean_name, &next_mean).map_err(|e| e.to_string())?;
                    g.set_state(var_name, &next_var).map_err(|e| e.to_string())?;
                    (mean, var)
                } else {
                    (channel(&rm)?, channel(&rv)?)
                };
                let inv = nn(var.add_scalar(eps).and_then(|v| v.rsqrt()))?;
                let y = nn(x.sub(&mean).and_then(|d| d.mul(&inv)))?;
                let (scale, bias) = (channel(&scale)?, channel(&bias)?);
                let y = nn(y.mul(&scale).and_then(|y| y.add(&bias)))?;
                one(y)
            }
            // Nearest-neighbour upsampling by whole factors (nn.Upsample,
            // F.interpolate(mode="nearest")): each element repeated along
            // each axis, as a broadcast of [.., d, 1, ..] to [.., d, s, ..]
            // (its gradient the sum over the copies). Other modes, fractional
            // factors and align_corners are refused by name.
            "Resize" => {
                let x = t(0)?;
                let mode = attr_s(node, "mode").unwrap_or_else(|| "nearest".into());
                let transform = attr_s(node, "coordinate_transformation_mode").unwrap_or_else(|| "half_pixel".into());
                let rounding = attr_s(node, "nearest_mode").unwrap_or_else(|| "round_prefer_floor".into());
                let half_pixel = matches!(transform.as_str(), "half_pixel" | "pytorch_half_pixel");
                // Nearest and half-pixel linear by whole factors take the
                // reshapes and broadcasts below; every other resize is one
                // interpolation matrix per resized axis.
                let dims = x.shape().to_vec();
                let axes: Vec<usize> = match attr_ints(node, "axes") {
                    Some(a) => a.iter().map(|&a| norm_axis(a, dims.len())).collect::<R<_>>()?,
                    None => (0..dims.len()).collect(),
                };
                let (scales, sizes) = (optional_const(2)?, optional_const(3)?);
                let whole = |f: f64| f >= 1.0 && f.fract() == 0.0 && f <= 1024.0;
                let whole_factors = match (&scales, &sizes) {
                    // A count other than the axes' goes to the general path,
                    // which names it.
                    (Some(sc), _) if !sc.vals.is_empty() => {
                        sc.vals.len() == axes.len() && sc.vals.iter().all(|&f| whole(f))
                    }
                    (_, Some(sz)) if !sz.vals.is_empty() => {
                        sz.vals.len() == axes.len()
                            && sz
                                .vals
                                .iter()
                                .zip(axes.iter().map(|&a| dims[a]))
                                .all(|(&n, d)| d > 0 && n >= d as f64 && (n as usize) % d == 0)
                    }
                    _ => true,
                };
                let floors = (transform == "asymmetric" && rounding == "floor")
                    || (half_pixel && matches!(rounding.as_str(), "round_prefer_floor" | "round_prefer_ceil"));
                let fast = match mode.as_str() {
                    "nearest" => floors,
                    "linear" => half_pixel,
                    _ => false,
                };
                let exclude = attr_i(node, "exclude_outside", 0) != 0;
                if !(fast && whole_factors && !exclude) {
                    let asked = ResizeAsk {
                        mode: &mode,
                        transform: &transform,
                        rounding: &rounding,
                        cubic_a: f64::from(attr_f(node, "cubic_coeff_a", -0.75)),
                        exclude,
                    };
                    if attr_i(node, "antialias", 0) != 0 {
                        return Err("antialias=1 is not supported".into());
                    }
                    if attr_s(node, "keep_aspect_ratio_policy").is_some_and(|p| p != "stretch") {
                        return Err("keep_aspect_ratio_policy other than 'stretch' is not supported".into());
                    }
                    let per_axis: Vec<(usize, usize, f64)> = match (&scales, &sizes) {
                        (Some(sc), _) if !sc.vals.is_empty() => {
                            if sc.vals.len() != axes.len() {
                                return Err(format!("{} scales for {} axes", sc.vals.len(), axes.len()));
                            }
                            axes.iter()
                                .zip(&sc.vals)
                                .map(|(&a, &f)| {
                                    if !(f.is_finite() && f > 0.0 && f <= 1024.0) {
                                        return Err(format!("scale {f} is not in (0, 1024]"));
                                    }
                                    Ok((a, (dims[a] as f64 * f).floor() as usize, f))
                                })
                                .collect::<R<_>>()?
                        }
                        (_, Some(sz)) if !sz.vals.is_empty() => {
                            if sz.vals.len() != axes.len() {
                                return Err(format!("{} sizes for {} axes", sz.vals.len(), axes.len()));
                            }
                            axes.iter()
                                .zip(&sz.vals)
                                .map(|(&a, &n)| {
                                    if !(n >= 1.0 && n <= (dims[a].max(1) * 1024) as f64) {
                                        return Err(format!("size {n} of axis {a} is not in [1, 1024 x {}]", dims[a]));
                                    }
                                    Ok((a, n as usize, n / dims[a].max(1) as f64))
                                })
                                .collect::<R<_>>()?
                        }
                        _ => return Err("Resize needs its scales or sizes as constants".into()),
                    };
                    let mut y = x.clone();
                    for (a, m, scale) in per_axis {
                        y = resize_axis(g, &y, a, m, scale, &asked)?;
                    }
                    return one(y);
                }
                // Here nearest or half-pixel linear, by whole factors
                // (`whole_factors` checked them).
                let given: Vec<usize> = match (scales, sizes) {
                    (Some(sc), _) if !sc.vals.is_empty() => sc.vals.iter().map(|&f| f as usize).collect(),
                    (_, Some(sz)) if !sz.vals.is_empty() => {
                        sz.vals.iter().zip(axes.iter().map(|&a| dims[a])).map(|(&n, d)| n as usize / d).collect()
                    }
                    _ => return Err("Resize needs its scales or sizes as constants".into()),
                };
                let mut factors = vec![1usize; dims.len()];
                for (&a, &f) in axes.iter().zip(&given) {
                    factors[a] = f;
                }
                if factors.iter().all(|&f| f == 1) {
                    return one(x);
                }
                if mode == "linear" {
                    if factors.len() < 3 || factors[..2] != [1, 1] {
                        return Err(format!("linear resizing by {factors:?}: the batch and channels keep their size"));
                    }
                    // Axis by axis: output q s + r reads the source at q + d_r,
                    // d_r = (r + 0.5) / s - 0.5 in (-0.5, 0.5): between element
                    // q and its neighbour on d_r's side (the edge element past
                    // the ends), as (1 - |d_r|) x + |d_r| neighbour.
                    let mut y = x.clone();
                    for (axis, &f) in factors.iter().enumerate().skip(2).filter(|(_, f)| **f > 1) {
                        let shape = y.shape().to_vec();
                        let n = shape[axis];
                        let part = |v: &Tensor, from: usize, to: usize| -> R<Tensor> {
                            let mut start = vec![0; shape.len()];
                            let mut limit = shape.clone();
                            (start[axis], limit[axis]) = (from, to);
                            nn(v.slice(&start, &limit, &vec![1; shape.len()]))
                        };
                        let (prev, next) = if n > 1 {
                            (
                                nn(Tensor::concat(&[&part(&y, 0, 1)?, &part(&y, 0, n - 1)?], axis as i64))?,
                                nn(Tensor::concat(&[&part(&y, 1, n)?, &part(&y, n - 1, n)?], axis as i64))?,
                            )
                        } else {
                            (y.clone(), y.clone())
                        };
                        // Each phase r as [.., n, 1, ..], joined to [.., n, f, ..].
                        let mut split: Vec<i64> = shape.iter().map(|&d| d as i64).collect();
                        split.insert(axis + 1, 1);
                        let mut phases = Vec::new();
                        for r in 0..f {
                            let d = (r as f64 + 0.5) / f as f64 - 0.5;
                            let side = if d >= 0.0 { &next } else { &prev };
                            let phase = nn(y
                                .mul_scalar(1.0 - d.abs())
                                .and_then(|a| side.mul_scalar(d.abs()).and_then(|b| a.add(&b)))
                                .and_then(|p| p.reshape(&split)))?;
                            phases.push(phase);
                        }
                        let refs: Vec<&Tensor> = phases.iter().collect();
                        let mut out: Vec<i64> = shape.iter().map(|&d| d as i64).collect();
                        out[axis] *= f as i64;
                        y = nn(Tensor::concat(&refs, axis as i64 + 1).and_then(|v| v.reshape(&out)))?;
                    }
                    return one(y);
                }
                let mut split = Vec::new();
                let mut spread = Vec::new();
                let mut out = Vec::new();
                for (&d, &f) in dims.iter().zip(&factors) {
                    split.extend([d as i64, 1]);
                    spread.extend([d, f]);
                    out.push((d * f) as i64);
                }
                one(nn(x.reshape(&split).and_then(|v| v.broadcast_to(&spread)).and_then(|v| v.reshape(&out)))?)
            }
            // y = scale (x - mean) / sqrt(var + eps) + B over each sample's
            // and channel's spatial axes (PyTorch's InstanceNorm, and its
            // GroupNorm, which exports as one over groups).
            "InstanceNormalization" => {
                let x = t(0)?;
                if x.rank() < 3 {
                    return Err(format!("the input is {}: [N, C, spatial...] (rank 3 at least)", x.spec()));
                }
                let eps = epsilon(node)?;
                let channels = x.shape()[1];
                let axes: Vec<i64> = (2..x.rank() as i64).collect();
                let mean = nn(x.mean(&axes, true))?;
                let centred = nn(x.sub(&mean))?;
                let var = nn(centred.mul(&centred).and_then(|sq| sq.mean(&axes, true)))?;
                let normal = nn(var.add_scalar(eps).and_then(|v| v.rsqrt()).and_then(|inv| centred.mul(&inv)))?;
                // scale and B [C] as [C, 1, ...] against [N, C, spatial...].
                let mut per_channel = vec![channels as i64];
                per_channel.extend(std::iter::repeat_n(1, x.rank() - 2));
                let (scale, bias) =
                    (self.tensor(g, input(1)?, Some(DType::F32))?, self.tensor(g, input(2)?, Some(DType::F32))?);
                for (what, v) in [("scale", &scale), ("B", &bias)] {
                    if v.shape() != [channels] {
                        return Err(format!("{what} is {}, not one value per channel ({channels})", v.spec()));
                    }
                }
                let (scale, bias) = (nn(scale.reshape(&per_channel))?, nn(bias.reshape(&per_channel))?);
                one(nn(normal.mul(&scale).and_then(|y| y.add(&bias)))?)
            }
            // Each group of `C / num_groups` channels normalized over
            // them and the spatial axes; then a scale and bias per channel
            // (opset 21) or per group (opset 18), as PyTorch's GroupNorm
            // at opset 21 and after.
            "GroupNormalization" => {
                let x = t(0)?;
                if x.rank() < 2 {
                    return Err(format!("the input is {}: [N, C, spatial...] (rank 2 at least)", x.spec()));
                }
                let eps = epsilon(node)?;
                let shape: Vec<i64> = x.shape().iter().map(|&d| d as i64).collect();
                let channels = x.shape()[1];
                let groups = attr_i(node, "num_groups", 0);
                if groups < 1 || channels % groups as usize != 0 {
                    return Err(format!("num_groups {groups} does not divide the {channels} channels"));
                }
                let rest = x.shape()[1..].iter().product::<usize>() as i64 / groups;
                let normal = nn(x
                    .reshape(&[shape[0], groups, rest])
                    .and_then(|grouped| grouped.layer_norm(None, None, 1, eps))
                    .and_then(|y| y.reshape(&shape)))?;
                let per = if self.opset >= 21 { channels } else { groups as usize };
                let mut per_channel = vec![channels as i64];
                per_channel.extend(std::iter::repeat_n(1, x.rank() - 2));
                let affine = |k: usize, what: &str| -> R<Tensor> {
                    let v = self.tensor(g, input(k)?, Some(DType::F32))?;
                    if v.shape() != [per] {
                        let of = if per == channels { "channel" } else { "group" };
                        return Err(format!("{what} is {}, not one value per {of} ({per})", v.spec()));
                    }
                    // A group's value for each of its channels.
                    let v = if per == channels {
                        v
                    } else {
                        let each = channels / per;
                        nn(v.reshape(&[groups, 1])
                            .and_then(|v| v.broadcast_to(&[per, each]))
                            .and_then(|v| v.reshape(&[channels as i64])))?
                    };
                    nn(v.reshape(&per_channel))
                };
                let (scale, bias) = (affine(1, "scale")?, affine(2, "bias")?);
                one(nn(normal.mul(&scale).and_then(|y| y.add(&bias)))?)
            }
            "LayerNormalization" => {
                let x = t(0)?;
                let axis = norm_axis(attr_i(node, "axis", -1), x.rank())?;
                let eps = epsilon(node)?;
                let dims = x.rank() - axis;
                let w = ins.get(1).and_then(|v| v.as_ref()).map(|v| self.tensor(g, v, Some(DType::F32))).transpose()?;
                // A constant bias of zeros (`LayerNorm(bias=False)`, which
                // the exporter writes as zeros) is no bias: the norm of a
                // residual stream then widens without a constant of the
                // old width in its way.
                let b = match ins.get(2).and_then(|v| v.as_ref()) {
                    Some(V::C(c)) if c.vals.iter().all(|&v| v == 0.0) => None,
                    other => other.map(|v| self.tensor(g, v, Some(DType::F32))).transpose()?,
                };
                let mut outs = vec![V::T(nn(x.layer_norm(w.as_ref(), b.as_ref(), dims, eps))?)];
                if node.output.iter().skip(1).any(|o| !o.is_empty()) {
                    // The statistics over the normalised axes, kept as
                    // dimensions of 1: Mean and InvStdDev.
                    let axes: Vec<i64> = (axis as i64..x.rank() as i64).collect();
                    let mean = nn(x.mean(&axes, true))?;
                    let centred = nn(x.sub(&mean))?;
                    let var = nn(centred.mul(&centred).and_then(|sq| sq.mean(&axes, true)))?;
                    let inv = nn(var.add_scalar(eps).and_then(|v| v.rsqrt()))?;
                    outs.push(V::T(mean));
                    outs.push(V::T(inv));
                }
                Ok(outs)
            }
            // x / sqrt(mean(x^2) + eps) * scale over the axes from `axis`
            // (opset 23; computed in f32, whatever its stash_type).
            "RMSNormalization" => {
                let x = t(0)?;
                let axis = norm_axis(attr_i(node, "axis", -1), x.rank())?;
                let eps = epsilon(node)?;
                let dims = x.rank() - axis;
                let scale = self.tensor(g, input(1)?, Some(DType::F32))?;
                if scale.shape() == &x.shape()[axis..] {
                    return one(nn(x.rms_norm(Some(&scale), dims, eps))?);
                }
                if broadcast(scale.shape(), x.shape()).ok().as_deref() != Some(x.shape()) {
                    return Err(format!("scale {} does not broadcast to X {}", scale.spec(), x.spec()));
                }
                one(nn(x.rms_norm(None, dims, eps).and_then(|y| y.mul(&scale)))?)
            }
            "MatMul" => {
                let (a, b) = (t(0)?, t(1)?);
                one(matmul(&a, &b)?)
            }
            "Gemm" => {
                let (a, b) = (t(0)?, t(1)?);
                let (ta, tb) = (attr_i(node, "transA", 0) != 0, attr_i(node, "transB", 0) != 0);
                let (alpha, beta) = (attr_f(node, "alpha", 1.0) as f64, attr_f(node, "beta", 1.0) as f64);
                let c = ins.get(2).and_then(|v| v.as_ref()).map(|v| self.tensor(g, v, Some(DType::F32))).transpose()?;
                let y = if !ta && tb && alpha == 1.0 && beta == 1.0 && c.as_ref().is_none_or(|c| c.rank() == 1) {
                    if a.rank() == 1 {
                        // A vector times a matrix (a MatMul that
                        // `onnx_fold` made a linear layer): one row.
                        let k = a.shape()[0] as i64;
                        let y = nn(a.reshape(&[1, k]).and_then(|row| row.linear(&b, c.as_ref())))?;
                        let n = y.shape()[1] as i64;
                        return Ok(vec![V::T(nn(y.reshape(&[n]))?)]);
                    }
                    nn(a.linear(&b, c.as_ref()))?
                } else {
                    let mut y = nn(a.matmul_t(&b, ta, tb))?;
                    if alpha != 1.0 {
                        y = nn(y.mul_scalar(alpha))?;
                    }
                    if let Some(c) = c {
                        let c = if beta != 1.0 { nn(c.mul_scalar(beta))? } else { c };
                        y = nn(y.add(&c))?;
                    }
                    y
                };
                one(y)
            }
            // A 1-D convolution or pooling is the 2-D one over a height of
            // 1: the input [N, C, L] as [N, C, 1, L], a weight [O, C/g, K]
            // as [O, C/g, 1, K], each spatial attribute given the height's
            // (stride, dilation and kernel 1, no padding).
            "Conv" | "ConvTranspose" | "MaxPool" | "AveragePool" if rank_of(ins.first()) == Some(3) => {
                let x = t(0)?;
                let height = |v: &Tensor| {
                    let s = v.shape();
                    nn(v.reshape(&[s[0] as i64, s[1] as i64, 1, s[2] as i64]))
                };
                let mut lifted = ins.to_vec();
                lifted[0] = Some(V::T(height(&x)?));
                if matches!(op, "Conv" | "ConvTranspose") {
                    let w = t(1)?;
                    if w.rank() != 3 {
                        return Err(format!("the 1-D input {} takes a weight of rank 3, not {}", x.spec(), w.spec()));
                    }
                    lifted[1] = Some(V::T(height(&w)?));
                }
                let mut flat = node.clone();
                for a in flat.attribute.iter_mut() {
                    match (a.name(), a.ints.as_slice()) {
                        ("strides" | "dilations" | "kernel_shape" | "output_shape", [v])
                        | ("output_shape", [_, _, v]) => a.ints = vec![1, *v],
                        ("output_padding", [v]) => a.ints = vec![0, *v],
                        ("pads", [begin, end]) => a.ints = vec![0, *begin, 0, *end],
                        (
                            "strides" | "dilations" | "kernel_shape" | "output_shape" | "output_padding" | "pads",
                            other,
                        ) => {
                            return Err(format!("{} {other:?} does not fit a 1-D {op}", a.name()));
                        }
                        _ => {}
                    }
                }
                let y = self.node_tensor(g, &flat, &lifted)?;
                let s = y.shape();
                one(nn(y.reshape(&[s[0] as i64, s[1] as i64, s[3] as i64]))?)
            }
            // A 3-D transposed convolution as the 2-D one over the depth's
            // windows: along the depth it is the convolution it is (the
            // input spread by the stride, padded by the kernel's reach less
            // the pads, the taps flipped), and the depth taps stack into
            // the input channels ([N D', Cin kd, H, W], the weight [Cin kd,
            // Cout/g, kh, kw]) of one 2-D ConvTranspose for the height and
            // width.
            "ConvTranspose" if rank_of(ins.first()) == Some(5) => {
                let (x, w) = (t(0)?, t(1)?);
                let (xs, ws) = (x.shape().to_vec(), w.shape().to_vec());
                if ws.len() != 5 {
                    return Err(format!("the 3-D input {} takes a weight of rank 5, not {}", x.spec(), w.spec()));
                }
                if ws[0] != xs[1] {
                    return Err(format!("the weight {} takes {} channels, the input has {}", w.spec(), ws[0], xs[1]));
                }
                let groups = attr_i(node, "group", 1);
                if groups < 1 || xs[1] % groups as usize != 0 {
                    return Err(format!("group {groups} does not divide the input's {} channels", xs[1]));
                }
                if let Some(k) = attr_ints(node, "kernel_shape")
                    && k != ws[2..].iter().map(|&v| v as i64).collect::<Vec<_>>()
                {
                    return Err(format!("kernel_shape {k:?} is not the weight's {:?}", &ws[2..]));
                }
                let (n, depth) = (xs[0], xs[2]);
                let depth_of = |name: &str, d: usize| spatial::<3>(attr_ints(node, name), d, name).map(|v| v[0]);
                let (kd, sd, dd, extra) =
                    (ws[2], depth_of("strides", 1)?, depth_of("dilations", 1)?, depth_of("output_padding", 0)?);
                if [sd, dd, kd, depth].iter().any(|v| !(1..=1 << 16).contains(v)) {
                    return Err(format!(
                        "the depth's stride {sd}, dilation {dd}, kernel {kd} and input {depth} must be from 1 to 65536"
                    ));
                }
                if kd > MAX_DEPTH_TAPS {
                    return Err(format!("a depth window of {kd} taps is more than the {MAX_DEPTH_TAPS} supported"));
                }
                if extra >= sd.max(dd) {
                    return Err(format!("output_padding {extra} is not below the stride or dilation"));
                }
                let reach = (dd * (kd - 1)) as i64;
                let full = (sd * (depth - 1) + extra) as i64 + reach + 1;
                // The depth's padding at each end, as the 2-D op finds its
                // own (`pads`, or from `output_shape` or SAME).
                let auto = attr_s(node, "auto_pad").unwrap_or_else(|| "NOTSET".into());
                let target = match attr_ints(node, "output_shape").as_deref() {
                    Some(&[d, _, _] | &[_, _, d, _, _]) if (1..=1 << 32).contains(&d) => Some(d),
                    Some(o) => return Err(format!("output_shape {o:?} is not the output's three spatial sizes")),
                    None if auto.starts_with("SAME_") => Some((depth * sd) as i64),
                    None => None,
                };
                let given = transposed_pad_attr(node, &auto, attr(node, "output_shape").is_some(), 3)?;
                let (begin, end) = transposed_pads(full, target, &auto, (given[0], given[3]));
                let out = full - begin - end;
                if out < 1 {
                    return Err(format!("pads {begin} and {end} leave no output along the depth (of {full})"));
                }
                // Spread along the depth, then padded (or cropped).
                let spread = spread(g, &x, 2, sd)?;
                let xp = pad_axis(g, &spread, 2, (reach - begin, reach - end + extra as i64), "constant", 0.0)?;
                let out = out as usize;
                let taps: Vec<Tensor> = (0..kd).map(|i| nn(xp.narrow(2, i * dd, out))).collect::<R<_>>()?;
                let folded = stack_taps(&taps)?;
                // The weight's depth taps reversed, stacked into its input
                // channels: [Cin kd, Cout/g, kh, kw].
                let flipped = nn(nn(w.gather(&reversed(g, kd)?, 2))?.permute(&[0, 2, 1, 3, 4]))?;
                let w2 = nn(flipped.reshape(&[(ws[0] * kd) as i64, ws[1] as i64, ws[3] as i64, ws[4] as i64]))?;
                let mut ins2 = ins.to_vec();
                ins2[0] = Some(V::T(folded));
                ins2[1] = Some(V::T(w2));
                one(unstack_depth(&self.node_tensor(g, &without_depth(node, op)?, &ins2)?, n, out)?)
            }
            // A 3-D convolution or pooling as the 2-D one over the depth's
            // windows: the input padded along the depth (zeros, -inf for the
            // maximum; a `ceil_mode` window past it too), and each window's
            // depth taps strided slices of it. A convolution stacks the taps
            // into the channels ([N D', C kd, H, W], the weight [O, C/g kd,
            // kh, kw]: one grouped 2-D convolution); pooling pools each tap's
            // [N, C D', H, W] in 2-D and takes the maximum or the sum over
            // the taps (an average divided by the depth's count, as the 2-D
            // one divides by its own: the counts multiply).
            "Conv" | "MaxPool" | "AveragePool" if rank_of(ins.first()) == Some(5) => {
                let x = t(0)?;
                let xs = x.shape().to_vec();
                let (n, c, depth, h, wd) = (xs[0], xs[1], xs[2], xs[3], xs[4]);
                let conv = op == "Conv";
                let w = if conv { Some(t(1)?) } else { None };
                let kernel = match &w {
                    Some(w) if w.rank() == 5 => {
                        let k = [w.shape()[2], w.shape()[3], w.shape()[4]];
                        if attr_ints(node, "kernel_shape").is_some_and(|a| a != k.map(|v| v as i64)) {
                            return Err(format!("kernel_shape is not the weight's {k:?}"));
                        }
                        k
                    }
                    Some(w) => {
                        return Err(format!("the 3-D input {} takes a weight of rank 5, not {}", x.spec(), w.spec()));
                    }
                    None => spatial::<3>(attr_ints(node, "kernel_shape"), 0, "kernel_shape")?,
                };
                let stride = spatial::<3>(attr_ints(node, "strides"), 1, "strides")?;
                let dilation = spatial::<3>(attr_ints(node, "dilations"), 1, "dilations")?;
                if kernel.contains(&0) || stride.contains(&0) || dilation.contains(&0) {
                    return Err(format!(
                        "the kernel {kernel:?}, strides {stride:?} and dilations {dilation:?} must be at least 1"
                    ));
                }
                let (kd, sd, dd) = (kernel[0], stride[0], dilation[0]);
                if depth == 0 {
                    return Err(format!("the input {} has no depth", x.spec()));
                }
                if kd > MAX_DEPTH_TAPS {
                    return Err(format!("a depth window of {kd} taps is more than the {MAX_DEPTH_TAPS} supported"));
                }
                // The depth's padding at each end; the other axes' go to
                // the 2-D op (SAME: it pads its own).
                let auto = attr_s(node, "auto_pad").unwrap_or_else(|| "NOTSET".into());
                let (begin, end) = match auto.as_str() {
                    "NOTSET" => match attr_ints(node, "pads").unwrap_or_else(|| vec![0; 6]).as_slice() {
                        p if p.len() == 6 && p.iter().all(|v| (0..1 << 20).contains(v)) => {
                            (p[0] as usize, p[3] as usize)
                        }
                        other => return Err(format!("pads {other:?}: expected six values from 0 to 2^20")),
                    },
                    "VALID" => (0, 0),
                    "SAME_UPPER" | "SAME_LOWER" => same_pads(depth, kd, sd, dd, auto == "SAME_UPPER"),
                    other => return Err(format!("auto_pad '{other}' is not supported")),
                };
                let ceil = !conv && attr_i(node, "ceil_mode", 0) != 0;
                let include = conv || attr_i(node, "count_include_pad", 0) != 0;
                let (out, past, counts) = pool_axis(depth, (begin, end), (kd, sd, dd), ceil, include, "the depth")?;
                let fill = if op == "MaxPool" { f64::NEG_INFINITY } else { 0.0 };
                let xp = pad_axis(g, &x, 2, (begin as i64, (end + past) as i64), "constant", fill)?;
                // Tap `i` of the depth windows `first..first + len`: [N, C,
                // len, H, W].
                let taps_of = |i: usize, first: usize, len: usize| {
                    let d0 = first * sd + i * dd;
                    let limit = d0 + (len - 1) * sd + 1;
                    if (d0, sd, limit) == (0, 1, xp.shape()[2]) {
                        // (A 1 x k x k window's one tap: the input itself.)
                        return Ok(xp.clone());
                    }
                    nn(xp.slice(&[0, 0, d0, 0, 0], &[n, c, limit, h, wd], &[1, 1, sd, 1, 1]))
                };
                // Tap `i` of every depth window: [N, C, D', H, W].
                let tap = |i: usize| taps_of(i, 0, out);
                let flat = without_depth(node, op)?;
                let (n_, c_, out_, h_, w_) = (n as i64, c as i64, out as i64, h as i64, wd as i64);
                if let Some(w) = w {
                    // A tap that reads only the depth's padding adds
                    // nothing: each run of outputs whose windows read the
                    // same taps is one 2-D convolution over just those (and
                    // their weights), the runs' outputs concatenated along
                    // the depth. At 4 frames under a window of 3 padded by
                    // 1 that is 10 taps of 12; a one-frame clip keeps 1 of
                    // 3. A run whose every tap reads padding keeps them all
                    // (its output is the bias).
                    let real = begin..begin + depth;
                    let mut runs: Vec<(usize, usize, Vec<usize>)> = Vec::new();
                    for o in 0..out {
                        let mut live: Vec<usize> = (0..kd).filter(|&i| real.contains(&(o * sd + i * dd))).collect();
                        if live.is_empty() {
                            live = (0..kd).collect();
                        }
                        match runs.last_mut() {
                            Some(run) if run.2 == live => run.1 += 1,
                            _ => runs.push((o, 1, live)),
                        }
                    }
                    if runs.len() > MAX_DEPTH_RUNS {
                        // Each run is a convolution: past a few, one over
                        // every tap that any output reads.
                        let mut union: Vec<usize> = runs.iter().flat_map(|r| r.2.clone()).collect();
                        union.sort_unstable();
                        union.dedup();
                        runs = vec![(0, out, union)];
                    }
                    let ws = w.shape().to_vec();
                    let mut parts = Vec::new();
                    for (first, len, live) in &runs {
                        let folded =
                            stack_taps(&live.iter().map(|&i| taps_of(i, *first, *len)).collect::<R<Vec<_>>>()?)?;
                        let w = if live.len() < kd { nn(w.gather(&tap_indices(g, live)?, 2))? } else { w.clone() };
                        let w2 =
                            nn(w.reshape(&[ws[0] as i64, (ws[1] * live.len()) as i64, ws[3] as i64, ws[4] as i64]))?;
                        let mut ins2 = ins.to_vec();
                        ins2[0] = Some(V::T(folded));
                        ins2[1] = Some(V::T(w2));
                        parts.push(unstack_depth(&self.node_tensor(g, &flat, &ins2)?, n, *len)?);
                    }
                    return one(match parts.len() {
                        1 => parts.remove(0),
                        _ => nn(Tensor::concat(&parts.iter().collect::<Vec<_>>(), 2))?,
                    });
                }
                let mut acc: Option<Tensor> = None;
                for i in 0..kd {
                    let mut ins2 = ins.to_vec();
                    ins2[0] = Some(V::T(nn(tap(i)?.reshape(&[n_, c_ * out_, h_, w_]))?));
                    let y = self.node_tensor(g, &flat, &ins2)?;
                    acc = Some(match acc {
                        None => y,
                        Some(a) => nn(if op == "MaxPool" { a.maximum(&y) } else { a.add(&y) })?,
                    });
                }
                let y = acc.ok_or("an empty window")?;
                let ys = y.shape().to_vec();
                let y = nn(y.reshape(&[n_, c_, out_, ys[2] as i64, ys[3] as i64]))?;
                if op == "MaxPool" {
                    return one(y);
                }
                // Divided by the depth's count per output.
                let scale: Vec<f64> = counts.iter().map(|&k| 1.0 / k as f64).collect();
                one(times_constant(g, &y, &scale, &[1, 1, out, 1, 1])?)
            }
            "Conv" => {
                let (x, w) = (t(0)?, t(1)?);
                if x.rank() != 4 || w.rank() != 4 {
                    return Err(format!(
                        "only 1-D, 2-D and 3-D convolutions are supported, the input is {} and the weight {}",
                        x.spec(),
                        w.spec()
                    ));
                }
                let b = ins.get(2).and_then(|v| v.as_ref()).map(|v| self.tensor(g, v, Some(DType::F32))).transpose()?;
                let kernel = [w.shape()[2], w.shape()[3]];
                if let Some(k) = attr_ints(node, "kernel_shape")
                    && k != [kernel[0] as i64, kernel[1] as i64]
                {
                    return Err(format!("kernel_shape {k:?} is not the weight's {kernel:?}"));
                }
                let stride = spatial::<2>(attr_ints(node, "strides"), 1, "strides")?;
                let dilation = spatial::<2>(attr_ints(node, "dilations"), 1, "dilations")?;
                let p = pads(node, &x.shape()[2..], kernel, stride, dilation)?;
                let (x, padding) = uneven(g, &x, &p, 0.0)?;
                let groups = attr_i(node, "group", 1);
                if groups < 1 {
                    return Err(format!("group {groups} must be at least 1"));
                }
                let o = Conv2dOptions { stride, padding, dilation, groups: groups as usize, ..Default::default() };
                one(nn(x.conv2d(&w, b.as_ref(), &o))?)
            }
            // The transposed convolution (a convolution's gradient with
            // respect to its input: ConvTranspose2d, a decoder's upsampling)
            // as the convolution it is: the input spread out by the stride
            // (zeros between its elements), padded by dilation (k - 1) - p
            // at each end (and output_padding at the end; a negative
            // padding crops), convolved at stride 1 with each group's
            // weight channels swapped and its taps flipped.
            "ConvTranspose" => {
                let (x, w) = (t(0)?, t(1)?);
                if x.rank() != 4 || w.rank() != 4 {
                    return Err(format!(
                        "only 1-D, 2-D and 3-D transposed convolutions are supported, the input is {} and the weight {}",
                        x.spec(),
                        w.spec()
                    ));
                }
                let groups = attr_i(node, "group", 1);
                let (xs, ws) = (x.shape().to_vec(), w.shape().to_vec());
                if groups < 1 || xs[1] % groups as usize != 0 {
                    return Err(format!("group {groups} does not divide the input's {} channels", xs[1]));
                }
                let groups = groups as usize;
                if ws[0] != xs[1] {
                    return Err(format!("the weight {} takes {} channels, the input has {}", w.spec(), ws[0], xs[1]));
                }
                let kernel = [ws[2], ws[3]];
                if let Some(k) = attr_ints(node, "kernel_shape")
                    && k != [kernel[0] as i64, kernel[1] as i64]
                {
                    return Err(format!("kernel_shape {k:?} is not the weight's {kernel:?}"));
                }
                let stride = spatial::<2>(attr_ints(node, "strides"), 1, "strides")?;
                let dilation = spatial::<2>(attr_ints(node, "dilations"), 1, "dilations")?;
                let extra = spatial::<2>(attr_ints(node, "output_padding"), 0, "output_padding")?;
                let within = |v: &[usize]| v.iter().all(|&d| (1..=1 << 16).contains(&d));
                if !(within(&stride) && within(&dilation) && within(&kernel) && within(&xs[2..])) {
                    return Err(format!(
                        "strides {stride:?}, dilations {dilation:?}, the kernel {kernel:?} and the input {} must be \
                         from 1 to 65536 along each spatial axis",
                        x.spec()
                    ));
                }
                for axis in 0..2 {
                    if extra[axis] >= stride[axis].max(dilation[axis]) {
                        return Err(format!("output_padding {} is not below the stride or dilation", extra[axis]));
                    }
                }
                // Padding at each end of each axis: `pads`, or from the
                // output's shape (`output_shape`, or the input's times the
                // stride for SAME): what the full output holds past it,
                // split between the ends (the extra one at the end for
                // SAME_UPPER, at the start otherwise).
                let auto = attr_s(node, "auto_pad").unwrap_or_else(|| "NOTSET".into());
                let output_shape = match attr_ints(node, "output_shape") {
                    Some(o) if o.len() == 4 => Some(o[2..].to_vec()),
                    Some(o) if o.len() == 2 => Some(o),
                    Some(o) => return Err(format!("output_shape {o:?} is not the output's two spatial sizes")),
                    None => None,
                };
                let full = |axis: usize| {
                    (stride[axis] * (xs[2 + axis] - 1) + extra[axis] + dilation[axis] * (kernel[axis] - 1) + 1) as i64
                };
                if output_shape.as_ref().is_some_and(|o| o.iter().any(|v| !(1..=1 << 32).contains(v))) {
                    return Err(format!("output_shape {output_shape:?} must be from 1 to 2^32 along each axis"));
                }
                let given = transposed_pad_attr(node, &auto, output_shape.is_some(), 2)?;
                let (mut begin, mut end) = ([0i64; 2], [0i64; 2]);
                for axis in 0..2 {
                    let target = match &output_shape {
                        Some(o) => Some(o[axis]),
                        None => auto.starts_with("SAME_").then_some((xs[2 + axis] * stride[axis]) as i64),
                    };
                    (begin[axis], end[axis]) =
                        transposed_pads(full(axis), target, &auto, (given[axis], given[2 + axis]));
                }
                for axis in 0..2 {
                    if full(axis) - begin[axis] - end[axis] < 1 {
                        return Err(format!(
                            "pads {} and {} leave no output along spatial axis {axis} (of {})",
                            begin[axis],
                            end[axis],
                            full(axis)
                        ));
                    }
                }
                let mut input = spread(g, &spread(g, &x, 2, stride[0])?, 3, stride[1])?;
                // The convolution's padding at each end: the kernel's
                // reach less the pads; output_padding at the end. The
                // part both ends share is the convolution's own.
                let mut padding = [0usize; 2];
                for axis in 0..2 {
                    let reach = (dilation[axis] * (kernel[axis] - 1)) as i64;
                    let (before, after) = (reach - begin[axis], reach - end[axis] + extra[axis] as i64);
                    let common = before.min(after).max(0);
                    padding[axis] = common as usize;
                    if (before, after) != (common, common) {
                        input = pad_axis(g, &input, 2 + axis, (before - common, after - common), "constant", 0.0)?;
                    }
                }
                // The weight [Cin, Cout/g, kh, kw] as a convolution's
                // [Cout, Cin/g, kh, kw], its taps in reverse.
                let rows = nn(w.gather(&reversed(g, kernel[0])?, 2))?;
                let flipped = nn(rows.gather(&reversed(g, kernel[1])?, 3))?;
                let (cin, cout_g) = (ws[0] as i64, ws[1] as i64);
                let (gi, kh, kw) = (groups as i64, kernel[0] as i64, kernel[1] as i64);
                let weight = if groups == 1 {
                    nn(flipped.permute(&[1, 0, 2, 3]))?
                } else {
                    let split = nn(flipped.reshape(&[gi, cin / gi, cout_g, kh, kw]))?;
                    let swapped = nn(split.permute(&[0, 2, 1, 3, 4]))?;
                    nn(swapped.reshape(&[gi * cout_g, cin / gi, kh, kw]))?
                };
                let b = ins.get(2).and_then(|v| v.as_ref()).map(|v| self.tensor(g, v, Some(DType::F32))).transpose()?;
                let o = Conv2dOptions { stride: [1, 1], padding, dilation, groups, ..Default::default() };
                one(nn(input.conv2d(&weight, b.as_ref(), &o))?)
            }
            // Pooling: windows at each end of the input padded by `pads`
            // (-inf for the maximum, zeros for the average); ceil_mode=1
            // adds a last window partly past the padded input (one that
            // starts inside the input or its start padding, as PyTorch
            // counts them). An average is over the window's input
            // elements, and its padding too with count_include_pad=1
            // (never past the padded input): where that is not the whole
            // window, the window's sum is scaled by a constant per output.
            // A dilated window is the maximum or sum of its taps, each a
            // strided slice.
            "MaxPool" | "AveragePool" => {
                let x = t(0)?;
                if x.rank() != 4 {
                    return Err(format!("only 1-D, 2-D and 3-D pooling is supported, the input is {}", x.spec()));
                }
                if node.output.iter().skip(1).any(|o| !o.is_empty()) {
                    return Err("the indices output is not supported".into());
                }
                let kernel = spatial::<2>(attr_ints(node, "kernel_shape"), 0, "kernel_shape")?;
                if kernel.contains(&0) {
                    return Err("kernel_shape is required".into());
                }
                let stride = spatial::<2>(attr_ints(node, "strides"), 1, "strides")?;
                let dilation = spatial::<2>(attr_ints(node, "dilations"), 1, "dilations")?;
                if stride.contains(&0) || dilation.contains(&0) {
                    return Err(format!("strides {stride:?} and dilations {dilation:?} must be at least 1"));
                }
                let p = pads(node, &x.shape()[2..], kernel, stride, dilation)?;
                let max = op == "MaxPool";
                let ceil = attr_i(node, "ceil_mode", 0) != 0;
                let include = attr_i(node, "count_include_pad", 0) != 0;
                let (mut out, mut past) = ([0usize; 2], [0usize; 2]);
                // Elements each output's window averages over, per axis.
                let mut counts: [Vec<usize>; 2] = [vec![], vec![]];
                for axis in 0..2 {
                    (out[axis], past[axis], counts[axis]) = pool_axis(
                        x.shape()[2 + axis],
                        (p.begin[axis], p.end[axis]),
                        (kernel[axis], stride[axis], dilation[axis]),
                        ceil,
                        include,
                        &format!("spatial axis {axis}"),
                    )?;
                }
                let fill = if max { f64::NEG_INFINITY } else { 0.0 };
                let taps = kernel[0] * kernel[1];
                let whole = |axis: usize| counts[axis].iter().all(|&c| c == kernel[axis]);
                // The pooled windows, and what each holds: an average over
                // the whole window (taps) or the taps' sum (1).
                let (y, holds) = if dilation == [1, 1] {
                    // The pooling op pads what both ends share itself, up
                    // to half the window (with the op's own value: -inf,
                    // or zeros counted in the average); the rest is padded
                    // here.
                    let mut x = x;
                    let mut padding = [0usize; 2];
                    for axis in 0..2 {
                        let after = p.end[axis] + past[axis];
                        let common = if max || include { p.begin[axis].min(after).min(kernel[axis] / 2) } else { 0 };
                        padding[axis] = common;
                        x = pad_axis(
                            g,
                            &x,
                            2 + axis,
                            ((p.begin[axis] - common) as i64, (after - common) as i64),
                            "constant",
                            fill,
                        )?;
                    }
                    let o = Pool2dOptions { kernel, stride, padding, ..Pool2dOptions::square(1) };
                    (nn(if max { x.max_pool2d(&o) } else { x.avg_pool2d(&o) })?, taps)
                } else {
                    if taps > 64 {
                        return Err(format!(
                            "dilated pooling of more than 64 taps (kernel {kernel:?}) is not supported"
                        ));
                    }
                    let mut x = x;
                    for axis in 0..2 {
                        let after = (p.end[axis] + past[axis]) as i64;
                        x = pad_axis(g, &x, 2 + axis, (p.begin[axis] as i64, after), "constant", fill)?;
                    }
                    let (n, c) = (x.shape()[0], x.shape()[1]);
                    let mut acc: Option<Tensor> = None;
                    for i in 0..kernel[0] {
                        for j in 0..kernel[1] {
                            let (h0, w0) = (i * dilation[0], j * dilation[1]);
                            let limit = [n, c, h0 + (out[0] - 1) * stride[0] + 1, w0 + (out[1] - 1) * stride[1] + 1];
                            let tap = nn(x.slice(&[0, 0, h0, w0], &limit, &[1, 1, stride[0], stride[1]]))?;
                            acc = Some(match acc {
                                None => tap,
                                Some(a) => nn(if max { a.maximum(&tap) } else { a.add(&tap) })?,
                            });
                        }
                    }
                    (acc.ok_or("an empty window")?, 1)
                };
                if max || (holds == taps && whole(0) && whole(1)) {
                    return one(y);
                }
                // The average over the elements each window counts, a
                // constant per output.
                if out[0].saturating_mul(out[1]) > 1 << 24 {
                    return Err(format!("an average over {out:?} windows of unequal counts is past 2^24 outputs"));
                }
                let scale: Vec<f64> = counts[0]
                    .iter()
                    .flat_map(|&a| counts[1].iter().map(move |&b| holds as f64 / (a * b) as f64))
                    .collect();
                one(times_constant(g, &y, &scale, &[1, 1, out[0], out[1]])?)
            }
            // PixelShuffle and its inverse: a reshape, a transpose and a
            // reshape (DCR: the depth's blocks outermost, PyTorch's
            // pixel_shuffle is CRD).
            "DepthToSpace" | "SpaceToDepth" => {
                let x = t(0)?;
                let b = attr_i(node, "blocksize", 0);
                let d = x.shape().to_vec();
                if d.len() != 4 || b < 1 {
                    return Err(format!(
                        "a blocksize of {b} for an input of {d:?}: 4-D NCHW and a blocksize of 1 or more"
                    ));
                }
                let (b, [n, c, h, w]) = (b as usize, [d[0], d[1], d[2], d[3]]);
                // (A block larger than the image, or whose square
                // overflows, splits nothing: refused before any product.)
                if b > c.max(h).max(w) {
                    return Err(format!("a blocksize of {b} for an input of {d:?}: larger than its every dimension"));
                }
                let bb = b.checked_mul(b).ok_or(format!("a blocksize of {b}: its square overflows"))?;
                let i = |v: &[usize]| v.iter().map(|&d| d as i64).collect::<Vec<_>>();
                let crd = match (op, attr_s(node, "mode").as_deref()) {
                    (_, None | Some("DCR")) => false,
                    (_, Some("CRD")) => true,
                    (_, Some(other)) => return Err(format!("mode '{other}': DCR or CRD")),
                };
                let y = if op == "DepthToSpace" {
                    if c % bb != 0 {
                        return Err(format!("{c} channels do not split into blocks of {b} x {b}"));
                    }
                    let (shape, perm) = if crd {
                        (vec![n, c / bb, b, b, h, w], [0, 1, 4, 2, 5, 3])
                    } else {
                        (vec![n, b, b, c / bb, h, w], [0, 3, 4, 1, 5, 2])
                    };
                    nn(nn(nn(x.reshape(&i(&shape)))?.permute(&perm))?.reshape(&i(&[n, c / bb, h * b, w * b])))?
                } else {
                    if h % b != 0 || w % b != 0 {
                        return Err(format!("a height and width of {h} x {w} do not split into blocks of {b}"));
                    }
                    let shape = [n, c, h / b, b, w / b, b];
                    let perm = if crd { [0, 1, 3, 5, 2, 4] } else { [0, 3, 5, 1, 2, 4] };
                    nn(nn(nn(x.reshape(&i(&shape)))?.permute(&perm))?.reshape(&i(&[n, c * bb, h / b, w / b])))?
                };
                one(y)
            }
            "GlobalAveragePool" => {
                let x = t(0)?;
                let axes: Vec<i64> = (2..x.rank() as i64).collect();
                one(nn(x.mean(&axes, true))?)
            }
            // (`AdaptiveMaxPool2d(1)`'s export.)
            "GlobalMaxPool" => {
                let x = t(0)?;
                let axes: Vec<i64> = (2..x.rank() as i64).collect();
                one(nn(x.max(&axes, true))?)
            }
            // A product: of constants (TorchScript's element count of a
            // shape, for `std`), folded; of a computed tensor, its slices
            // along each axis multiplied in order (exact where an element
            // is 0, as a sum of logarithms is not), at most 256 a product.
            "ReduceProd" => {
                let dims = shape_of(input(0)?);
                let rank = dims.len();
                let axes =
                    if self.opset >= 18 { optional_const(1)?.map(|c| c.as_ints()) } else { attr_ints(node, "axes") };
                let keep = attr_i(node, "keepdims", 1) != 0;
                let axes: Vec<usize> = match axes {
                    Some(a) if !a.is_empty() => a.iter().map(|&a| norm_axis(a, rank)).collect::<R<_>>()?,
                    _ if attr_i(node, "noop_with_empty_axes", 0) != 0 => return Ok(vec![input(0)?.clone()]),
                    _ => (0..rank).collect(),
                };
                let mut out_dims = dims.clone();
                axes.iter().for_each(|&a| out_dims[a] = 1);
                let squeezed: Vec<usize> =
                    out_dims.iter().enumerate().filter(|(a, _)| !axes.contains(a)).map(|(_, &d)| d).collect();
                let final_dims = if keep { out_dims.clone() } else { squeezed };
                match input(0)? {
                    V::C(c) => {
                        let n = numel(&out_dims)?;
                        let mut vals = vec![1.0; n];
                        let (ds, os) = (strides_of(&dims), strides_of(&out_dims));
                        for (i, &v) in c.vals.iter().enumerate() {
                            let at: usize = (0..rank)
                                .map(|d| if axes.contains(&d) { 0 } else { (i / ds[d]) % dims[d] * os[d] })
                                .sum();
                            vals[at] *= v;
                        }
                        if !c.float {
                            // (An integer product, as ONNX computes it.)
                            vals.iter_mut().for_each(|v| *v = v.round());
                        }
                        Ok(vec![V::C(Const { dims: final_dims, vals, float: c.float })])
                    }
                    V::T(x) => {
                        let count: usize = axes.iter().map(|&a| dims[a]).product();
                        if count > 256 {
                            return Err(format!(
                                "a product over {count} elements of a computed tensor: at most 256 (each is a \
                                 multiplication)"
                            ));
                        }
                        let mut y = x.clone();
                        for &a in &axes {
                            let mut acc = nn(y.narrow(a as i64, 0, 1))?;
                            for i in 1..dims[a] {
                                acc = nn(acc.mul(&nn(y.narrow(a as i64, i, 1))?))?;
                            }
                            y = acc;
                        }
                        let shape: Vec<i64> = final_dims.iter().map(|&d| d as i64).collect();
                        one(if keep { y } else { nn(y.reshape(&shape))? })
                    }
                }
            }
            "ReduceMean" | "ReduceSum" | "ReduceMax" | "ReduceMin" | "ReduceLogSumExp" | "ReduceL1" | "ReduceL2"
            | "ReduceSumSquare" => {
                let rank = match input(0)? {
                    V::T(x) => x.rank(),
                    V::C(c) => c.dims.len(),
                };
                let axes = if (op == "ReduceSum" && self.opset >= 13) || self.opset >= 18 {
                    optional_const(1)?.map(|c| c.as_ints())
                } else {
                    attr_ints(node, "axes")
                };
                let keep = attr_i(node, "keepdims", 1) != 0;
                let axes = match axes {
                    Some(a) if !a.is_empty() => a,
                    // No reduction; the elementwise step still runs (|x|,
                    // x^2, and sqrt(x^2) = |x|).
                    _ if attr_i(node, "noop_with_empty_axes", 0) != 0 => {
                        return match op {
                            "ReduceL1" | "ReduceL2" => one(nn(t(0)?.abs())?),
                            "ReduceSumSquare" => {
                                let x = t(0)?;
                                one(nn(x.mul(&x))?)
                            }
                            _ => Ok(vec![input(0)?.clone()]),
                        };
                    }
                    _ => (0..rank as i64).collect(),
                };
                let axes: Vec<i64> = axes.iter().map(|&a| norm_axis(a, rank).map(|a| a as i64)).collect::<R<_>>()?;
                let x = t(0)?;
                // Integers (a count of a mask's ones, `(~pad).sum(1)`; the
                // largest id) reduce as floats and come back: exact while
                // the sums stay within 2^24 (hl's reductions are of floats).
                let integer = x.dtype();
                if matches!(integer, DType::I32 | DType::I64) && matches!(op, "ReduceSum" | "ReduceMax" | "ReduceMin") {
                    let f = nn(x.cast(DType::F32))?;
                    let y = nn(match op {
                        "ReduceSum" => f.sum(&axes, keep),
                        "ReduceMax" => f.max(&axes, keep),
                        _ => f.neg().and_then(|n| n.max(&axes, keep)).and_then(|m| m.neg()),
                    })?;
                    return one(nn(y.cast(integer))?);
                }
                one(nn(match op {
                    "ReduceMean" => x.mean(&axes, keep),
                    "ReduceSum" => x.sum(&axes, keep),
                    "ReduceL1" => x.abs().and_then(|a| a.sum(&axes, keep)),
                    // sqrt(s) where s > 0, else 0, read through a sqrt of 1
                    // there: an all-zero row's gradient is 0, as PyTorch's
                    // norm gives (sqrt's derivative at 0 made it NaN).
                    "ReduceL2" => x.mul(&x).and_then(|q| q.sum(&axes, keep)).and_then(|s| {
                        let zero = s.scalar(0.0)?.broadcast_to(s.shape())?;
                        let one = s.scalar(1.0)?.broadcast_to(s.shape())?;
                        let positive = s.compare(Compare::Gt, &zero)?;
                        let root = Tensor::select(&positive, &s, &one)?.sqrt()?;
                        Tensor::select(&positive, &root, &zero)
                    }),
                    "ReduceSumSquare" => x.mul(&x).and_then(|q| q.sum(&axes, keep)),
                    "ReduceMin" => x.neg().and_then(|n| n.max(&axes, keep)).and_then(|m| m.neg()),
                    // log(sum(exp(x - m))) + m, m the maximum where it is
                    // finite (else 0: a line of -inf gives -inf, not NaN).
                    "ReduceLogSumExp" => (|| {
                        let shift = |keepdim: bool| -> nn::Result<Tensor> {
                            let m = x.max(&axes, keepdim)?;
                            let finite = m.abs()?.compare(Compare::Lt, &m.scalar(f64::INFINITY)?)?;
                            Tensor::select(&finite, &m, &m.scalar(0.0)?)
                        };
                        x.sub(&shift(true)?)?.exp()?.sum(&axes, keep)?.log()?.add(&shift(keep)?)
                    })(),
                    _ => x.max(&axes, keep),
                })?)
            }
            "Cast" => {
                let to =
                    DataType::try_from(attr_i(node, "to", 1) as i32).map_err(|_| "unknown 'to' type".to_string())?;
                let float = is_float_type(to);
                match input(0)? {
                    V::C(c) => {
                        let mut c = c.clone();
                        if !float {
                            c.vals.iter_mut().for_each(|v| {
                                *v = if to == DataType::Bool { (*v != 0.0) as i32 as f64 } else { v.trunc() }
                            });
                        }
                        c.float = float;
                        Ok(vec![V::C(c)])
                    }
                    V::T(x) => {
                        let dtype = match to {
                            _ if float => DType::F32,
                            DataType::Bool => DType::I1,
                            DataType::Int64 | DataType::Int32 | DataType::Int16 | DataType::Int8 | DataType::Uint8 => {
                                DType::I32
                            }
                            other => return Err(format!("cast to {} is not supported", other.as_str_name())),
                        };
                        // f32 throughout: a cast to a 16-bit float rounds to it and back.
                        let narrow = match to {
                            DataType::Float16 => Some(DType::F16),
                            DataType::Bfloat16 => Some(DType::BF16),
                            _ => None,
                        };
                        let x = match narrow {
                            Some(d) if x.dtype().is_float() => nn(x.cast(d))?,
                            _ => x.clone(),
                        };
                        one(if x.dtype() == dtype { x } else { nn(x.cast(dtype))? })
                    }
                }
            }
            // The dynamo exporter's unoptimized graphs (`optimize=False`)
            // cast scalars to their operand's type: a Cast to the target's
            // element type as the importer holds it (floats f32, integers
            // i32, booleans i1).
            "CastLike" => {
                // (A constant target's element type from where it comes
                // from: a boolean casts by "not zero", not by truncation.)
                let boolean = match input(1)? {
                    V::T(t) => t.dtype() == DType::I1,
                    V::C(_) => self.element_type(&node.input[1]) == Some(DataType::Bool),
                };
                let (float, target) = match input(1)? {
                    V::T(t) => (t.dtype().is_float(), Some(t.dtype())),
                    V::C(c) => (c.float, boolean.then_some(DType::I1)),
                };
                match input(0)? {
                    V::C(c) => {
                        let mut c = c.clone();
                        if boolean {
                            c.vals.iter_mut().for_each(|v| *v = (*v != 0.0) as i32 as f64);
                        } else if c.float && !float {
                            c.vals.iter_mut().for_each(|v| *v = v.trunc());
                        }
                        c.float = float;
                        Ok(vec![V::C(c)])
                    }
                    V::T(x) => {
                        let dtype = target.unwrap_or(if float { DType::F32 } else { DType::I32 });
                        one(if x.dtype() == dtype { x.clone() } else { nn(x.cast(dtype))? })
                    }
                }
            }
            // Noise, drawn per step in @loss from the run's seed (the
            // node's `seed` is not taken), with no gradient; in @forward,
            // which takes no seed, its mean (an integer Bernoulli's
            // likelier value), as dropout is off there.
            _ if NOISE.contains(&op) => {
                if self.trains && attr(node, "seed").is_some() {
                    self.seeded_random.borrow_mut().insert(node_label(node));
                }
                // (A float `dtype` is f32 here, as every float the importer
                // reads: a 16-bit one is not rounded to, nor is a double
                // kept; an integer Bernoulli is i32, a boolean one i1.)
                let to = attr(node, "dtype")
                    .map(|a| DataType::try_from(a.i() as i32).map_err(|_| format!("unknown dtype {}", a.i())))
                    .transpose()?;
                if op != "Bernoulli"
                    && let Some(d) = to.filter(|&d| !is_float_type(d))
                {
                    return Err(format!("dtype {}: {op} draws floats", d.as_str_name()));
                }
                let like = if matches!(op, "RandomNormal" | "RandomUniform") {
                    let shape = attr_ints(node, "shape").ok_or_else(|| format!("{op} needs the attribute 'shape'"))?;
                    if shape.iter().any(|&d| d < 0) {
                        return Err(format!("negative dimension in the shape {shape:?}"));
                    }
                    let dims: Vec<usize> = shape.iter().map(|&d| d as usize).collect();
                    numel(&dims)?;
                    self.materialize(g, &Const { dims, vals: vec![0.0], float: true }, Some(DType::F32))?
                } else {
                    let x = t(0)?;
                    if op == "Bernoulli" && !x.dtype().is_float() {
                        return Err(format!("the probabilities are {}: Bernoulli takes floats", x.dtype().mlir()));
                    }
                    if x.dtype().is_float() { x } else { nn(x.cast(DType::F32))? }
                };
                let (mean, scale) = (attr_f(node, "mean", 0.0) as f64, attr_f(node, "scale", 1.0) as f64);
                let (low, high) = (attr_f(node, "low", 0.0) as f64, attr_f(node, "high", 1.0) as f64);
                one(match op {
                    "RandomNormal" | "RandomNormalLike" => nn(like.randn_like(mean, scale))?,
                    "RandomUniform" | "RandomUniformLike" => nn(like.rand_like(low, high))?,
                    _ => {
                        let dtype = match to {
                            None => like.dtype(),
                            Some(d) if is_float_type(d) => DType::F32,
                            Some(DataType::Bool) => DType::I1,
                            Some(_) => DType::I32,
                        };
                        // In @forward, a float Bernoulli is its mean, p
                        // (an inverted dropout's `x * bernoulli(keep) /
                        // keep` is then x, as PyTorch's eval mode gives);
                        // an integer or boolean one its likelier value.
                        if !g.is_training() && dtype.is_float() {
                            like.clone()
                        } else {
                            // 1 where a uniform number falls below p (in
                            // @forward the uniform's midpoint: p above 1/2).
                            let hit = nn(like.rand_like(0.0, 1.0).and_then(|u| u.compare(Compare::Lt, &like)))?;
                            if dtype == DType::I1 { hit } else { nn(hit.cast(dtype))? }
                        }
                    }
                })
            }
            "Dropout" => {
                if node.output.get(1).is_some_and(|o| !self.unused(o)) {
                    return Err("the mask output is used by the graph, which AICF does not support".into());
                }
                // AICF applies dropout in @loss, where it trains, and never
                // in @forward. A training-mode export's constant true is
                // that, for a model imported to train; imported to run
                // forward only (--loss none), it would be dropped silently.
                if self.opset >= 12 && ins.get(2).is_some_and(|v| v.is_some()) {
                    match optional_const(2) {
                        Ok(Some(c)) if c.vals.iter().all(|&v| v == 0.0) || self.trains => {}
                        _ => {
                            return Err("training_mode set (or computed): AICF applies dropout in @loss, where it \
                                        trains, and never in @forward (import with a --loss to train the model)"
                                .into());
                        }
                    }
                }
                let ratio = if self.opset >= 12 {
                    optional_const(1)?.map(|c| first(&c, "ratio")).transpose()?.unwrap_or(0.5)
                } else {
                    attr_f(node, "ratio", 0.5) as f64
                };
                // One the export marks for inference (training_mode false
                // or absent: jax2onnx's deterministic apply writes so)
                // drops while training all the same: said.
                let inference = self.opset >= 12
                    && optional_const(2).ok().flatten().is_none_or(|c| c.vals.iter().all(|&v| v == 0.0));
                if self.trains && ratio > 0.0 && inference {
                    self.inference_dropouts.borrow_mut().insert(node_label(node));
                }
                if self.trains && ratio > 0.0 && attr(node, "seed").is_some() {
                    self.seeded_random.borrow_mut().insert(node_label(node));
                }
                // Training mode follows the function traced (@loss trains),
                // not the export's training_mode input.
                one(nn(t(0)?.dropout(ratio))?)
            }
            "Flatten" => {
                let axis = attr_i(node, "axis", 1);
                let dims = shape_of(input(0)?);
                let a = if axis < 0 { axis + dims.len() as i64 } else { axis };
                if a < 0 || a > dims.len() as i64 {
                    return Err(format!("axis {axis} is out of range for rank {}", dims.len()));
                }
                let outer: usize = dims[..a as usize].iter().product();
                let inner: usize = dims[a as usize..].iter().product();
                reshape_v(self, g, input(0)?, &[outer, inner])
            }
            "Reshape" => {
                let target = if self.opset >= 5 {
                    konst(1, "the shape")?.as_ints()
                } else {
                    attr_ints(node, "shape").unwrap_or_default()
                };
                let dims = shape_of(input(0)?);
                let allow_zero = attr_i(node, "allowzero", 0) != 0;
                let total: usize = dims.iter().product();
                let mut out: Vec<i64> = Vec::new();
                for (k, &d) in target.iter().enumerate() {
                    out.push(if d == 0 && !allow_zero {
                        *dims.get(k).ok_or("0 copies a dimension the input lacks")? as i64
                    } else {
                        d
                    });
                }
                let known = out
                    .iter()
                    .filter(|&&d| d != -1)
                    .try_fold(1i64, |n, &d| n.checked_mul(d))
                    .ok_or_else(|| format!("shape {target:?} overflows"))?;
                let holes = out.iter().filter(|&&d| d == -1).count();
                if holes > 1 || out.iter().any(|&d| d < -1) || (holes == 1 && (known <= 0 || total as i64 % known != 0))
                {
                    return Err(format!("cannot reshape {dims:?} to {target:?}"));
                }
                let shape: Vec<usize> =
                    out.iter().map(|&d| if d == -1 { total / known as usize } else { d as usize }).collect();
                if shape.iter().product::<usize>() != total {
                    return Err(format!("cannot reshape {dims:?} ({total} elements) to {shape:?}"));
                }
                match reshaped_root {
                    Some(root) => reshape_v(self, g, &V::T(root), &shape),
                    None => reshape_v(self, g, input(0)?, &shape),
                }
            }
            "Squeeze" | "Unsqueeze" => {
                let dims = shape_of(input(0)?);
                let axes =
                    if self.opset >= 13 { optional_const(1)?.map(|c| c.as_ints()) } else { attr_ints(node, "axes") };
                let shape: Vec<usize> = if op == "Squeeze" {
                    match axes {
                        None => dims.iter().copied().filter(|&d| d != 1).collect(),
                        Some(axes) => {
                            let axes: Vec<usize> = axes.iter().map(|&a| norm_axis(a, dims.len())).collect::<R<_>>()?;
                            if let Some(&a) = axes.iter().find(|&&a| dims[a] != 1) {
                                return Err(format!("axis {a} of {dims:?} is not 1"));
                            }
                            dims.iter().enumerate().filter(|(i, _)| !axes.contains(i)).map(|(_, &d)| d).collect()
                        }
                    }
                } else {
                    let axes = axes.ok_or("Unsqueeze needs axes")?;
                    let rank = dims.len() + axes.len();
                    let axes: Vec<usize> = axes.iter().map(|&a| norm_axis(a, rank)).collect::<R<_>>()?;
                    let mut src = dims.iter();
                    (0..rank).map(|i| if axes.contains(&i) { 1 } else { src.next().copied().unwrap_or(1) }).collect()
                };
                reshape_v(self, g, input(0)?, &shape)
            }
            // tf2onnx's `ReverseV2` of a sequence (a Keras RNN with
            // `go_backwards`, a Bidirectional's backward half): lengths the
            // import knows (the shape's), one for every row.
            "ReverseSequence" => {
                let x = self.tensor(g, input(0)?, None)?;
                let lens = konst(1, "sequence_lens")?;
                if x.rank() < 2 {
                    return Err(format!("an input of rank {}; ReverseSequence takes at least 2", x.rank()));
                }
                let (time, batch) = (attr_i(node, "time_axis", 0), attr_i(node, "batch_axis", 1));
                if !matches!((time, batch), (0, 1) | (1, 0)) {
                    return Err(format!("time_axis {time} and batch_axis {batch}: one is 0, the other 1"));
                }
                let (steps, rows) = (x.shape()[time as usize], x.shape()[batch as usize]);
                if lens.vals.len() != rows {
                    return Err(format!("{} sequence lengths for a batch of {rows}", lens.vals.len()));
                }
                let len = lens.vals.first().copied().unwrap_or(0.0);
                if lens.vals.iter().any(|&l| l != len) {
                    return Err(format!(
                        "sequence lengths {:?} that differ between rows are not supported (a batch's rows are \
                         reversed alike)",
                        lens.as_ints()
                    ));
                }
                if !(len >= 1.0 && len <= steps as f64) {
                    return Err(format!("a sequence length of {len} for {steps} steps (from 1 to {steps})"));
                }
                let len = len as usize;
                let order: Vec<usize> = (0..len).rev().chain(len..steps).collect();
                one(nn(x.gather(&tap_indices(g, &order)?, time))?)
            }
            "Transpose" => {
                let dims = shape_of(input(0)?);
                let perm = attr_ints(node, "perm").unwrap_or_else(|| (0..dims.len() as i64).rev().collect());
                let mut seen = perm.clone();
                seen.sort_unstable();
                if seen != (0..dims.len() as i64).collect::<Vec<_>>() {
                    return Err(format!("perm {perm:?} is not a permutation of {} axes", dims.len()));
                }
                match input(0)? {
                    V::C(c) => {
                        let out: Vec<usize> = perm.iter().map(|&p| dims[p as usize]).collect();
                        let n = c.vals.len();
                        let mut vals = vec![0.0; n];
                        let strides = strides_of(&dims);
                        for (i, v) in vals.iter_mut().enumerate() {
                            let mut rem = i;
                            let mut src = 0;
                            for k in (0..out.len()).rev() {
                                let coord = rem % out[k];
                                rem /= out[k];
                                src += coord * strides[perm[k] as usize];
                            }
                            *v = c.vals[src];
                        }
                        Ok(vec![V::C(Const { dims: out, vals, float: c.float })])
                    }
                    V::T(x) => one(nn(x.permute(&perm))?),
                }
            }
            "Concat" => {
                let axis = attr_i(node, "axis", 0);
                let present: Vec<&V> = ins.iter().flatten().collect();
                let first = present.first().ok_or("no inputs")?;
                let rank = shape_of(first).len();
                let a = norm_axis(axis, rank)?;
                if present.iter().all(|v| matches!(v, V::C(_))) {
                    let cs: Vec<&Const> =
                        present.iter().filter_map(|v| if let V::C(c) = v { Some(c) } else { None }).collect();
                    let fits = |c: &&Const| {
                        c.dims.len() == rank
                            && c.dims.iter().zip(&cs[0].dims).enumerate().all(|(i, (x, y))| i == a || x == y)
                    };
                    if !cs.iter().all(fits) {
                        let shapes: Vec<&Vec<usize>> = cs.iter().map(|c| &c.dims).collect();
                        return Err(format!("shapes {shapes:?} do not concatenate along axis {a}"));
                    }
                    let mut dims = cs[0].dims.clone();
                    dims[a] = cs.iter().map(|c| c.dims[a]).sum();
                    let outer: usize = dims[..a].iter().product();
                    let mut vals = Vec::new();
                    for o in 0..outer {
                        for c in &cs {
                            let chunk: usize = c.dims[a..].iter().product();
                            vals.extend_from_slice(&c.vals[o * chunk..(o + 1) * chunk]);
                        }
                    }
                    return Ok(vec![V::C(Const { dims, vals, float: cs[0].float })]);
                }
                let dtype = present.iter().find_map(|v| if let V::T(x) = v { Some(x.dtype()) } else { None });
                let ts: Vec<Tensor> = present.iter().map(|v| self.tensor(g, v, dtype)).collect::<R<_>>()?;
                let refs: Vec<&Tensor> = ts.iter().filter(|t| t.shape()[a] > 0).collect();
                one(nn(Tensor::concat(&refs, a as i64))?)
            }
            "Split" => {
                let x = t(0)?;
                let a = norm_axis(attr_i(node, "axis", 0), x.rank())?;
                let n = node.output.len();
                let sizes: Vec<usize> = match if self.opset >= 13 {
                    optional_const(1)?.map(|c| c.as_ints())
                } else {
                    attr_ints(node, "split")
                } {
                    Some(s) => s.iter().map(|&v| v.max(0) as usize).collect(),
                    None => {
                        let d = x.shape()[a];
                        let chunk = d.div_ceil(n.max(1));
                        (0..n).map(|i| chunk.min(d.saturating_sub(i * chunk))).collect()
                    }
                };
                let covered = sizes.iter().try_fold(0usize, |t, &v| t.checked_add(v));
                if sizes.len() != n || covered != Some(x.shape()[a]) {
                    return Err(format!("split sizes {sizes:?} do not cover dimension {a} of {}", x.spec()));
                }
                let mut start = 0;
                let mut outs = Vec::new();
                for s in sizes {
                    outs.push(V::T(nn(x.narrow(a as i64, start, s))?));
                    start += s;
                }
                Ok(outs)
            }
            "Slice" => {
                let dims = shape_of(input(0)?);
                let (starts, ends, axes, steps) = if self.opset >= 10 {
                    (
                        konst(1, "starts")?.as_ints(),
                        konst(2, "ends")?.as_ints(),
                        optional_const(3)?.map(|c| c.as_ints()),
                        optional_const(4)?.map(|c| c.as_ints()),
                    )
                } else {
                    (
                        attr_ints(node, "starts").unwrap_or_default(),
                        attr_ints(node, "ends").unwrap_or_default(),
                        attr_ints(node, "axes"),
                        None,
                    )
                };
                let axes = axes.unwrap_or_else(|| (0..starts.len() as i64).collect());
                let steps = steps.unwrap_or_else(|| vec![1; starts.len()]);
                if ends.len() != starts.len() || axes.len() != starts.len() || steps.len() != starts.len() {
                    return Err("starts, ends, axes and steps differ in length".into());
                }
                // Per axis: the first index, the step and the count taken.
                let mut first = vec![0i64; dims.len()];
                let mut step = vec![1i64; dims.len()];
                let mut count: Vec<usize> = dims.clone();
                for k in 0..starts.len() {
                    let a = norm_axis(axes[k], dims.len())?;
                    let d = dims[a] as i64;
                    let wrap = |v: i64| if v < 0 { v.saturating_add(d) } else { v };
                    match steps[k] {
                        0 => return Err("a step of 0".into()),
                        s if s > 0 => {
                            let lo = wrap(starts[k]).clamp(0, d);
                            let hi = wrap(ends[k]).clamp(0, d).max(lo);
                            (first[a], step[a], count[a]) = (lo, s, ((hi - lo) as u64).div_ceil(s as u64) as usize);
                        }
                        // Backwards from start (at most d - 1) down to just
                        // above end (at least -1: through index 0).
                        s => {
                            let lo = wrap(starts[k]).clamp(0, (d - 1).max(0));
                            let end = wrap(ends[k]).clamp(-1, d - 1).min(lo);
                            let n = if d == 0 { 0 } else { ((lo - end) as u64).div_ceil(s.unsigned_abs()) as usize };
                            (first[a], step[a], count[a]) = (lo, s, n);
                        }
                    }
                }
                match input(0)? {
                    V::C(c) => {
                        let strides = strides_of(&dims);
                        let n: usize = count.iter().product();
                        let vals = (0..n)
                            .map(|i| {
                                let mut rem = i;
                                let mut src = 0;
                                for k in (0..count.len()).rev() {
                                    let coord = (rem % count[k]) as i64;
                                    rem /= count[k];
                                    src += (first[k] + coord * step[k]) as usize * strides[k];
                                }
                                c.vals[src]
                            })
                            .collect();
                        Ok(vec![V::C(Const { dims: count, vals, float: c.float })])
                    }
                    // Positive steps slice; an axis taken backwards is then
                    // a gather of its constant indices (its gradient a
                    // scatter-add).
                    V::T(x) => {
                        let backwards: Vec<usize> = (0..step.len()).filter(|&k| step[k] < 0).collect();
                        let lo: Vec<usize> =
                            (0..first.len()).map(|k| if step[k] < 0 { 0 } else { first[k] as usize }).collect();
                        let st: Vec<usize> = step.iter().map(|&s| if s < 0 { 1 } else { s as usize }).collect();
                        let hi: Vec<usize> =
                            (0..lo.len())
                                .map(|k| {
                                    if step[k] < 0 {
                                        dims[k]
                                    } else {
                                        (lo[k] + count[k] * st[k]).min(dims[k]).max(lo[k])
                                    }
                                })
                                .collect();
                        let mut y = if lo.iter().all(|&l| l == 0) && hi == dims && st.iter().all(|&s| s == 1) {
                            x.clone()
                        } else {
                            nn(x.slice(&lo, &hi, &st))?
                        };
                        for k in backwards {
                            let indices: Vec<f64> =
                                (0..count[k]).map(|i| (first[k] + i as i64 * step[k]) as f64).collect();
                            let idx = self.materialize(
                                g,
                                &Const { dims: vec![count[k]], vals: indices, float: false },
                                Some(DType::I32),
                            )?;
                            y = nn(y.gather(&idx, k as i64))?;
                        }
                        one(y)
                    }
                }
            }
            // Pads built from the ops autodiff already knows: constants
            // (their gradient nothing) and slices of the input concatenated
            // around it, axis after axis as numpy.pad applies them; a
            // negative pad crops.
            "Pad" => {
                let x = t(0)?;
                let rank = x.rank();
                let mode = attr_s(node, "mode").unwrap_or_else(|| "constant".into());
                let (pads, value, axes) = if self.opset >= 11 {
                    let pads = konst(1, "the pads")?.as_ints();
                    let value = match optional_const(2)? {
                        Some(c) if c.vals.len() == 1 => c.vals[0],
                        Some(c) => return Err(format!("constant_value has {} values; Pad takes one", c.vals.len())),
                        None => 0.0,
                    };
                    let axes = optional_const(3)?.map(|c| c.as_ints());
                    (pads, value, axes)
                } else {
                    let pads = attr_ints(node, "pads").ok_or("Pad needs the attribute 'pads'")?;
                    (pads, f64::from(attr_f(node, "value", 0.0)), None)
                };
                let axes: Vec<usize> = match axes {
                    Some(a) => a.iter().map(|&a| norm_axis(a, rank)).collect::<R<_>>()?,
                    None => (0..rank).collect(),
                };
                if pads.len() != 2 * axes.len() {
                    return Err(format!("{} pads for {} axes; Pad takes two an axis", pads.len(), axes.len()));
                }
                if !value.is_finite() && mode == "constant" && !x.dtype().is_float() {
                    return Err(format!("constant_value {value} for an integer tensor"));
                }
                let mut y = x.clone();
                for (k, &a) in axes.iter().enumerate() {
                    let (before, after) = (pads[k], pads[axes.len() + k]);
                    y = pad_axis(g, &y, a, (before, after), &mode, value)?;
                }
                one(y)
            }
            "Gather" => {
                let dims = shape_of(input(0)?);
                let a = norm_axis(attr_i(node, "axis", 0), dims.len())?;
                match (input(0)?, input(1)?) {
                    (V::C(c), V::C(i)) => {
                        let idx: Vec<usize> = i
                            .as_ints()
                            .iter()
                            .map(|&k| {
                                let k = if k < 0 { k + dims[a] as i64 } else { k };
                                if k < 0 || k >= dims[a] as i64 {
                                    Err(format!("index {k} is out of range for {dims:?} axis {a}"))
                                } else {
                                    Ok(k as usize)
                                }
                            })
                            .collect::<R<_>>()?;
                        let outer: usize = dims[..a].iter().product();
                        let inner: usize = dims[a + 1..].iter().product();
                        let mut vals = Vec::new();
                        for o in 0..outer {
                            for &k in &idx {
                                let at = (o * dims[a] + k) * inner;
                                vals.extend_from_slice(&c.vals[at..at + inner]);
                            }
                        }
                        let mut out = dims[..a].to_vec();
                        out.extend(&i.dims);
                        out.extend(&dims[a + 1..]);
                        Ok(vec![V::C(Const { dims: out, vals, float: c.float })])
                    }
                    // Every index of the axis in order (Hugging Face's mask
                    // `m[arange(B)[:, None], arange(S)]` of a flattened `m`,
                    // its flat indices folded at the export's batch) splits
                    // the axis into the indices' shape: a reshape (of the
                    // tensor flattened, where it was). Gathered, the constant
                    // indices fixed the model's batch.
                    // (Of a flattened computed tensor only: a table's rows
                    // gathered in order, a position embedding's, stay a
                    // gather, the embedding growth reads.)
                    (V::T(data), V::C(i))
                        if i.vals.len() == dims[a]
                            && node.input.first().is_some_and(|n| self.reshaped_from.contains_key(n))
                            && i.vals.iter().enumerate().all(|(k, &v)| v == k as f64) =>
                    {
                        let mut to: Vec<i64> = dims[..a].iter().map(|&d| d as i64).collect();
                        to.extend(i.dims.iter().map(|&d| d as i64));
                        to.extend(dims[a + 1..].iter().map(|&d| d as i64));
                        // (A reshape keeps its elements: the chain's first
                        // tensor holds as many.)
                        let source = node.input.first().and_then(|n| self.reshaped_from.get(n)).unwrap_or(data).clone();
                        if let Some(out) = node.output.first() {
                            self.reshaped_from.insert(out.clone(), source.clone());
                        }
                        let to: Vec<usize> = to.iter().map(|&d| d as usize).collect();
                        reshape_v(self, g, &V::T(source), &to)
                    }
                    (data, V::C(i)) => {
                        let x = self.padded_table(g, node, data, a)?;
                        // Constant indices are checked here, as ONNX makes
                        // them (in [-d, d)), not by the kernel at run time.
                        let d = dims[a] as i64;
                        let ks: Vec<f64> = i
                            .as_ints()
                            .iter()
                            .map(|&k| match k {
                                k if (-d..d).contains(&k) => Ok((if k < 0 { k + d } else { k }) as f64),
                                k => Err(format!("index {k} is out of range for {dims:?} axis {a} (in [-{d}, {d}))")),
                            })
                            .collect::<R<_>>()?;
                        let idx = self.materialize(
                            g,
                            &Const { dims: i.dims.clone(), vals: ks, float: false },
                            Some(DType::I32),
                        )?;
                        one(nn(x.gather(&idx, a as i64))?)
                    }
                    (data, V::T(i)) => {
                        // Negative indices count from the end: i + d where i < 0.
                        let x = self.padded_table(g, node, data, a)?;
                        let d = nn(g.constant(&[dims[a] as f64], &TensorSpec::new(i.shape(), i.dtype())))?;
                        let zero = nn(g.constant(&[0.0], &TensorSpec::new(i.shape(), i.dtype())))?;
                        let negative = nn(i.compare(Compare::Lt, &zero))?;
                        let wrapped = nn(i.add(&d))?;
                        let i = nn(Tensor::select(&negative, &wrapped, i))?;
                        one(nn(x.gather(&i, a as i64))?)
                    }
                }
            }
            "Expand" => {
                let target: Vec<usize> = konst(1, "the shape")?.as_ints().iter().map(|&d| d.max(0) as usize).collect();
                let dims = shape_of(input(0)?);
                let shape = broadcast(&dims, &target)?;
                match input(0)? {
                    V::C(c) => {
                        let n = numel(&shape)?;
                        let vals = (0..n).map(|i| c.vals[broadcast_index(i, &shape, &c.dims)]).collect();
                        Ok(vec![V::C(Const { dims: shape, vals, float: c.float })])
                    }
                    V::T(x) if x.shape() == shape.as_slice() => one(x.clone()),
                    V::T(x) => one(nn(x.broadcast_to(&shape))?),
                }
            }
            "Einsum" => {
                let equation = attr_s(node, "equation").unwrap_or_default();
                let dtype = ins.iter().flatten().find_map(|v| if let V::T(x) = v { Some(x.dtype()) } else { None });
                let operands: Vec<Tensor> = ins.iter().flatten().map(|v| self.tensor(g, v, dtype)).collect::<R<_>>()?;
                one(nn(Tensor::einsum(&equation, &operands.iter().collect::<Vec<_>>()))?)
            }
            "Tile" => {
                let repeats = konst(1, "the repeats")?.as_ints();
                let dims = shape_of(input(0)?);
                if repeats.len() != dims.len() {
                    return Err(format!("{} repeats for an input of rank {}: one per axis", repeats.len(), dims.len()));
                }
                if let Some(r) = repeats.iter().find(|&&r| r < 1) {
                    return Err(format!(
                        "a repeat of {r}: the output would be empty or negative in size, which AICF does not compile"
                    ));
                }
                let repeats: Vec<usize> = repeats.iter().map(|&r| r as usize).collect();
                let shape: Vec<usize> =
                    dims.iter().zip(&repeats).map(|(d, r)| d.checked_mul(*r)).collect::<Option<_>>().ok_or_else(
                        || format!("repeats {repeats:?} of a tensor of shape {dims:?} overflow its size"),
                    )?;
                match input(0)? {
                    V::C(c) => {
                        let n = numel(&shape)?;
                        let strides = strides_of(&c.dims);
                        let vals = (0..n)
                            .map(|i| {
                                // Each output coordinate's source: modulo the input's size.
                                let (mut rest, mut at) = (i, 0);
                                for axis in (0..shape.len()).rev() {
                                    at += (rest % shape[axis]) % c.dims[axis] * strides[axis];
                                    rest /= shape[axis];
                                }
                                c.vals[at]
                            })
                            .collect();
                        Ok(vec![V::C(Const { dims: shape, vals, float: c.float })])
                    }
                    V::T(x) => {
                        // An axis of d repeated r times: [.., 1, d, ..]
                        // broadcast to [.., r, d, ..], read as [.., r d, ..].
                        let mut y = x.clone();
                        for (axis, &r) in repeats.iter().enumerate().filter(|(_, r)| **r > 1) {
                            let s = y.shape().to_vec();
                            let mut wide: Vec<usize> = s[..axis].to_vec();
                            wide.push(1);
                            wide.extend_from_slice(&s[axis..]);
                            let as_i64 = |v: &[usize]| v.iter().map(|&d| d as i64).collect::<Vec<_>>();
                            let lifted = nn(y.reshape(&as_i64(&wide)))?;
                            wide[axis] = r;
                            let copies = nn(lifted.broadcast_to(&wide))?;
                            let mut joined = s.clone();
                            joined[axis] = shape[axis];
                            y = nn(copies.reshape(&as_i64(&joined)))?;
                        }
                        one(y)
                    }
                }
            }
            other => Err(format!("{other} is listed as supported but not translated")),
        }
    }
}

/// ONNX's GatherND of constants: `indices`' last axis (length `k`) picks
/// along `data`'s axes `b..b + k` after the first `b` (batch) axes, which
/// both share; the result is `indices.dims[..-1] ++ data.dims[b + k..]`.
fn gather_nd(data: &Const, indices: &Const, batch_dims: i64) -> R<Const> {
    let (dr, ir) = (data.dims.len(), indices.dims.len());
    let b = usize::try_from(batch_dims).map_err(|_| format!("batch_dims {batch_dims} is negative"))?;
    let k = *indices.dims.last().ok_or("GatherND's indices are a scalar (rank 1 at least)")?;
    if b >= ir || b + k > dr || data.dims[..b] != indices.dims[..b] {
        return Err(format!(
            "GatherND of data {:?} at indices {:?} with batch_dims {b}: the shapes do not fit",
            data.dims, indices.dims
        ));
    }
    let slice: usize = data.dims[b + k..].iter().product();
    let strides = strides_of(&data.dims);
    let mut dims = indices.dims[..ir - 1].to_vec();
    dims.extend_from_slice(&data.dims[b + k..]);
    let tuples: usize = indices.dims[..ir - 1].iter().product();
    let per_batch: usize = indices.dims[b..ir - 1].iter().product();
    let mut vals = Vec::with_capacity(numel(&dims)?);
    for t in 0..tuples {
        // The batch position's offset into data.
        let mut rest = t / per_batch.max(1);
        let mut offset = 0;
        for axis in (0..b).rev() {
            offset += (rest % data.dims[axis]) * strides[axis];
            rest /= data.dims[axis];
        }
        for j in 0..k {
            let n = data.dims[b + j] as i64;
            let raw = indices.vals[t * k + j] as i64;
            let i = if raw < 0 { raw + n } else { raw };
            if !(0..n).contains(&i) {
                return Err(format!("GatherND index {raw} is out of range for an axis of {n}"));
            }
            offset += i as usize * strides[b + j];
        }
        vals.extend_from_slice(&data.vals[offset..offset + slice]);
    }
    Ok(Const { dims, vals, float: data.float })
}

/// The f64 function of a unary ONNX op that folds a float constant.
fn unary_fold(op: &str) -> Option<fn(f64) -> f64> {
    Some(match op {
        "Sin" => f64::sin,
        "Cos" => f64::cos,
        "Atan" => f64::atan,
        "Tan" => f64::tan,
        "Sinh" => f64::sinh,
        "Cosh" => f64::cosh,
        "Floor" => f64::floor,
        "Ceil" => f64::ceil,
        "Round" => f64::round_ties_even,
        "Sqrt" => f64::sqrt,
        "Exp" => f64::exp,
        "Log" => f64::ln,
        "Abs" => f64::abs,
        "Relu" => |v| if v > 0.0 || v.is_nan() { v } else { 0.0 },
        "Sigmoid" => |v| 1.0 / (1.0 + (-v).exp()),
        "Tanh" => f64::tanh,
        "Erf" => libm::erf,
        "Reciprocal" => |v| 1.0 / v,
        _ => return None,
    })
}

/// ONNX's ScatterND of constants: a copy of `data` where each index tuple
/// of `indices` (its last axis, of length `k`) names a slice of `data`'s
/// last axes after the first `k`, which `updates` replaces (or, with a
/// `reduction`, combines: add, mul, max, min).
fn scatter_nd(data: &Const, indices: &Const, updates: &Const, reduction: &str) -> R<Const> {
    let (dr, ir) = (data.dims.len(), indices.dims.len());
    let k = *indices.dims.last().ok_or("ScatterND's indices are a scalar (rank 1 at least)")?;
    if k > dr {
        return Err(format!("ScatterND of data {:?} at index tuples of {k}: more than its rank", data.dims));
    }
    let mut want = indices.dims[..ir - 1].to_vec();
    want.extend_from_slice(&data.dims[k..]);
    if updates.dims != want {
        return Err(format!(
            "ScatterND of data {:?} at indices {:?} takes updates {want:?}, not {:?}",
            data.dims, indices.dims, updates.dims
        ));
    }
    let combine: fn(f64, f64) -> f64 = match reduction {
        "none" => |_, u| u,
        "add" => |a, u| a + u,
        "mul" => |a, u| a * u,
        "max" => f64::max,
        "min" => f64::min,
        other => return Err(format!("ScatterND's reduction '{other}' is not one ONNX defines")),
    };
    let slice: usize = data.dims[k..].iter().product();
    let strides = strides_of(&data.dims);
    let tuples: usize = indices.dims[..ir - 1].iter().product();
    let mut vals = data.vals.clone();
    for t in 0..tuples {
        let mut offset = 0;
        for j in 0..k {
            let n = data.dims[j] as i64;
            let raw = indices.vals[t * k + j] as i64;
            let i = if raw < 0 { raw + n } else { raw };
            if !(0..n).contains(&i) {
                return Err(format!("ScatterND index {raw} is out of range for an axis of {n}"));
            }
            offset += i as usize * strides[j];
        }
        for (v, u) in vals[offset..offset + slice].iter_mut().zip(&updates.vals[t * slice..(t + 1) * slice]) {
            *v = combine(*v, *u);
        }
    }
    Ok(Const { dims: data.dims.clone(), vals, float: data.float })
}

/// ONNX's GatherElements of constants: `out[p] = data[p with axis
/// coordinate indices[p]]`, the shape of `indices`.
/// TopK of a constant: the `k` largest (or smallest) along `axis` in order,
/// the lower index first among equals, and their indices.
fn top_k(c: &Const, axis: usize, k: usize, largest: bool) -> (Const, Const) {
    let n = c.dims[axis];
    let inner: usize = c.dims[axis + 1..].iter().product();
    let outer: usize = c.dims[..axis].iter().product();
    let mut dims = c.dims.clone();
    dims[axis] = k;
    let (mut values, mut indices) = (vec![0.0; outer * k * inner], vec![0.0; outer * k * inner]);
    for o in 0..outer {
        for j in 0..inner {
            let mut order: Vec<usize> = (0..n).collect();
            let at = |i: usize| c.vals[(o * n + i) * inner + j];
            // (A stable sort: equal values keep their order.)
            order.sort_by(|&p, &q| {
                let (x, y) = (at(p), at(q));
                if largest { y.total_cmp(&x) } else { x.total_cmp(&y) }
            });
            for (r, &i) in order.iter().take(k).enumerate() {
                values[(o * k + r) * inner + j] = at(i);
                indices[(o * k + r) * inner + j] = i as f64;
            }
        }
    }
    (Const { dims: dims.clone(), vals: values, float: c.float }, Const { dims, vals: indices, float: false })
}

/// ScatterElements of constants: `data` with each update written (or
/// combined by `reduction`) at its index's element.
fn scatter_elements(data: &Const, indices: &Const, updates: &Const, axis: i64, reduction: &str) -> R<Const> {
    let rank = data.dims.len();
    let axis = norm_axis(axis, rank)?;
    if indices.dims.len() != rank || updates.dims != indices.dims {
        return Err(format!(
            "ScatterElements of data {:?} at indices {:?} with updates {:?}: the shapes do not fit",
            data.dims, indices.dims, updates.dims
        ));
    }
    let mut vals = data.vals.clone();
    for (p, offset) in element_offsets(data, indices, axis, "ScatterElements")?.into_iter().enumerate() {
        let (old, u) = (vals[offset], updates.vals[p]);
        vals[offset] = match reduction {
            "none" => u,
            "add" => old + u,
            "mul" => old * u,
            "max" => old.max(u),
            "min" => old.min(u),
            other => return Err(format!("ScatterElements' reduction '{other}' is not one ONNX defines")),
        };
    }
    Ok(Const { dims: data.dims.clone(), vals, float: data.float })
}

fn gather_elements(data: &Const, indices: &Const, axis: i64) -> R<Const> {
    let rank = data.dims.len();
    let axis = norm_axis(axis, rank)?;
    if indices.dims.len() != rank {
        return Err(format!("GatherElements' indices {:?} are not of data's rank {rank}", indices.dims));
    }
    let vals = element_offsets(data, indices, axis, "GatherElements")?.into_iter().map(|o| data.vals[o]).collect();
    Ok(Const { dims: indices.dims.clone(), vals, float: data.float })
}

/// Where each element of constant `indices` points into constant `data`
/// along `axis` (GatherElements, ScatterElements): checked, negative ones
/// counting from the end.
fn element_offsets(data: &Const, indices: &Const, axis: usize, op: &str) -> R<Vec<usize>> {
    let rank = data.dims.len();
    let (ds, is) = (strides_of(&data.dims), strides_of(&indices.dims));
    let n = data.dims[axis] as i64;
    let mut offsets = Vec::with_capacity(indices.vals.len());
    for (p, &raw) in indices.vals.iter().enumerate() {
        let raw = raw as i64;
        let i = if raw < 0 { raw + n } else { raw };
        if !(0..n).contains(&i) {
            return Err(format!("{op} index {raw} is out of range for an axis of {n}"));
        }
        let mut offset = 0;
        for d in 0..rank {
            let c = (p / is[d]) % indices.dims[d];
            if d != axis && c >= data.dims[d] {
                return Err(format!("{op}'s indices {:?} exceed data {:?}", indices.dims, data.dims));
            }
            offset += if d == axis { i as usize } else { c } * ds[d];
        }
        offsets.push(offset);
    }
    Ok(offsets)
}

/// A traced op's result, its error as the importer's (the message). (A
/// function beside the `nn` module: `nn::` names the module, `nn(..)` this.)
fn nn(r: nn::Result<Tensor>) -> R<Tensor> {
    r.map_err(|e| e.to_string())
}

fn shape_of(v: &V) -> Vec<usize> {
    match v {
        V::T(x) => x.shape().to_vec(),
        V::C(c) => c.dims.clone(),
    }
}

fn strides_of(dims: &[usize]) -> Vec<usize> {
    let mut s = vec![1; dims.len()];
    for i in (0..dims.len().saturating_sub(1)).rev() {
        s[i] = s[i + 1] * dims[i + 1];
    }
    s
}

fn reshape_v(_: &Importer<'_>, _: &Graph, v: &V, shape: &[usize]) -> R<Vec<V>> {
    match v {
        V::C(c) => Ok(vec![V::C(Const { dims: shape.to_vec(), vals: c.vals.clone(), float: c.float })]),
        V::T(x) if x.shape() == shape => Ok(vec![V::T(x.clone())]),
        V::T(x) => {
            let s: Vec<i64> = shape.iter().map(|&d| d as i64).collect();
            Ok(vec![V::T(x.reshape(&s).map_err(|e| e.to_string())?)])
        }
    }
}

/// An attribute of one value per spatial axis (`d` for each where it is
/// absent): `[h, w]`, or `[d, h, w]`.
fn spatial<const N: usize>(v: Option<Vec<i64>>, d: usize, what: &str) -> R<[usize; N]> {
    match v {
        None => Ok([d; N]),
        Some(v) if v.len() == N && v.iter().all(|x| (0..=1 << 20).contains(x)) => {
            Ok(std::array::from_fn(|i| v[i] as usize))
        }
        Some(other) => {
            let n = ["no", "one", "two", "three"].get(N).map_or(N.to_string(), |w| w.to_string());
            Err(format!("{what} {other:?}: expected {n} values from 0 to 2^20"))
        }
    }
}

/// The padding at the two ends of an axis of `size` elements under SAME
/// (`upper`: SAME_UPPER): the output the input over the stride, rounded up;
/// the odd element at the end for SAME_UPPER, at the start for SAME_LOWER.
fn same_pads(size: usize, kernel: usize, stride: usize, dilation: usize, upper: bool) -> (usize, usize) {
    let out = size.div_ceil(stride.max(1));
    let reach = kernel.saturating_sub(1) * dilation + 1;
    let total = (out.saturating_sub(1) * stride + reach).saturating_sub(size);
    let (b, e) = split_total(total as i64, upper);
    (b as usize, e as usize)
}

/// A padding of `total` (negative: a crop) split between the two ends: the
/// odd one at the end when `upper`, at the start otherwise.
fn split_total(total: i64, upper: bool) -> (i64, i64) {
    let half = total.div_euclid(2);
    if upper { (half, total - half) } else { (total - half, half) }
}

/// The indices `k - 1, ..., 0`: a window's taps in reverse.
fn reversed(g: &Graph, k: usize) -> R<Tensor> {
    tap_indices(g, &(0..k).rev().collect::<Vec<_>>())
}

/// The indices `taps` as an i32 constant (for a gather along a window axis).
fn tap_indices(g: &Graph, taps: &[usize]) -> R<Tensor> {
    let idx: Vec<f64> = taps.iter().map(|&i| i as f64).collect();
    g.constant(&idx, &TensorSpec::new(vec![taps.len()], DType::I32)).map_err(|e| e.to_string())
}

/// `node` for the 2-D op that runs a 3-D one over the depth's windows: the
/// per-axis attributes without the depth's.
fn without_depth(node: &NodeProto, op: &str) -> R<NodeProto> {
    let mut flat = node.clone();
    for a in flat.attribute.iter_mut() {
        match (a.name(), a.ints.len()) {
            ("strides" | "dilations" | "kernel_shape" | "output_padding" | "output_shape", 3) => {
                a.ints = a.ints[1..].to_vec()
            }
            ("output_shape", 5) => a.ints = a.ints[3..].to_vec(),
            ("pads", 6) => a.ints = vec![a.ints[1], a.ints[2], a.ints[4], a.ints[5]],
            ("strides" | "dilations" | "kernel_shape" | "output_padding" | "output_shape" | "pads", _) => {
                return Err(format!("{} {:?} does not fit a 3-D {op}", a.name(), a.ints));
            }
            _ => {}
        }
    }
    Ok(flat)
}

/// Padding at the start and at the end of each of the two spatial axes.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Pads {
    begin: [usize; 2],
    end: [usize; 2],
}

/// The padding of a convolution or pooling from `pads` / `auto_pad`
/// (SAME: the output's size the input's over the stride, rounded up; the
/// odd element at the end for SAME_UPPER, at the start for SAME_LOWER).
fn pads(node: &NodeProto, sizes: &[usize], kernel: [usize; 2], stride: [usize; 2], dilation: [usize; 2]) -> R<Pads> {
    let auto = attr_s(node, "auto_pad").unwrap_or_else(|| "NOTSET".into());
    let p: Vec<i64> = match auto.as_str() {
        "NOTSET" => attr_ints(node, "pads").unwrap_or_else(|| vec![0; 4]),
        "VALID" => vec![0; 4],
        "SAME_UPPER" | "SAME_LOWER" => {
            let [(t, b), (l, r)] =
                [0, 1].map(|i| same_pads(sizes[i], kernel[i], stride[i], dilation[i], auto == "SAME_UPPER"));
            [t, l, b, r].map(|v| v as i64).to_vec()
        }
        other => return Err(format!("auto_pad '{other}' is not supported")),
    };
    // (Beyond 2^20 a padding is no model's: the padded tensor would not fit.)
    match p.as_slice() {
        &[t, l, b, r] if [t, l, b, r].iter().all(|v| (0..1 << 20).contains(v)) => {
            Ok(Pads { begin: [t as usize, l as usize], end: [b as usize, r as usize] })
        }
        other => Err(format!("pads {other:?}: expected four values from 0 to 2^20")),
    }
}

/// A transposed convolution's `pads` attribute (`rank` begins, then
/// `rank` ends), zeros under an `auto_pad` or an `output_shape` (which
/// decide the padding instead), with the `auto_pad` checked.
fn transposed_pad_attr(node: &NodeProto, auto: &str, output_shape: bool, rank: usize) -> R<Vec<i64>> {
    match auto {
        "NOTSET" if !output_shape => match attr_ints(node, "pads") {
            None => Ok(vec![0; 2 * rank]),
            Some(p) if p.len() == 2 * rank && p.iter().all(|v| (0..1 << 20).contains(v)) => Ok(p),
            Some(p) => Err(format!("pads {p:?}: expected {} values from 0 to 2^20", 2 * rank)),
        },
        "NOTSET" | "SAME_UPPER" | "SAME_LOWER" => Ok(vec![0; 2 * rank]),
        "VALID" if !output_shape => Ok(vec![0; 2 * rank]),
        other if output_shape => Err(format!("auto_pad '{other}' is not supported with output_shape")),
        other => Err(format!("auto_pad '{other}' is not supported")),
    }
}

/// A transposed convolution's padding at the two ends of an axis whose
/// full output is `full`: with a `target` size (`output_shape`, or the
/// input's times the stride under SAME) what the full output holds past
/// it, the odd one at the end under SAME_UPPER and at the start otherwise
/// (negative: more output than the full one); else `pads`.
fn transposed_pads(full: i64, target: Option<i64>, auto: &str, pads: (i64, i64)) -> (i64, i64) {
    let Some(target) = target else { return pads };
    split_total(full - target, auto == "SAME_UPPER")
}

/// `x` spread along `axis` by `stride`, as a transposed convolution reads
/// its input: `stride - 1` zeros between neighbours, `(L - 1) stride + 1`
/// elements.
fn spread(g: &Graph, x: &Tensor, axis: usize, stride: usize) -> R<Tensor> {
    if stride == 1 {
        return Ok(x.clone());
    }
    let shape = x.shape().to_vec();
    let dims = |v: &[usize]| v.iter().map(|&d| d as i64).collect::<Vec<_>>();
    let (mut lifted, mut zeros) = (shape.clone(), shape.clone());
    lifted.insert(axis + 1, 1);
    zeros.insert(axis + 1, stride - 1);
    let z = nn(g.constant(&[0.0], &TensorSpec::new(zeros, x.dtype())))?;
    let joined = nn(Tensor::concat(&[&nn(x.reshape(&dims(&lifted)))?, &z], (axis + 1) as i64))?;
    let mut flat = shape.clone();
    flat[axis] *= stride;
    nn(nn(joined.reshape(&dims(&flat)))?.narrow(axis as i64, 0, (shape[axis] - 1) * stride + 1))
}

/// The depth taps `[N, C, D', H, W]` of a 3-D window stacked into the
/// channels: `[N D', C kd, H, W]`, channel `c kd + i` tap `i` of channel `c`
/// (a weight `[O, C/g, kd, ...]` reshaped to `[O, C/g kd, ...]` reads them
/// so).
fn stack_taps(taps: &[Tensor]) -> R<Tensor> {
    let s: Vec<i64> = taps.first().ok_or("a window of no taps")?.shape().iter().map(|&d| d as i64).collect();
    let lifted: Vec<Tensor> =
        taps.iter().map(|t| nn(t.reshape(&[s[0], s[1], 1, s[2], s[3], s[4]]))).collect::<R<_>>()?;
    let stacked =
        if lifted.len() == 1 { lifted[0].clone() } else { nn(Tensor::concat(&lifted.iter().collect::<Vec<_>>(), 2))? };
    let folded = nn(stacked.permute(&[0, 3, 1, 2, 4, 5]))?;
    nn(folded.reshape(&[s[0] * s[2], s[1] * taps.len() as i64, s[3], s[4]]))
}

/// A 2-D result `[N D', O, H', W']` over the depth's windows back to 3-D:
/// `[N, O, D', H', W']`.
fn unstack_depth(y: &Tensor, n: usize, depth: usize) -> R<Tensor> {
    let s = y.shape();
    let y = nn(y.reshape(&[n as i64, depth as i64, s[1] as i64, s[2] as i64, s[3] as i64]))?;
    nn(y.permute(&[0, 2, 1, 3, 4]))
}

/// The most taps a 3-D convolution's or pooling's depth window may have:
/// each is a slice of the input (stacked into a convolution's channels).
const MAX_DEPTH_TAPS: usize = 64;

/// The most runs of depth windows (outputs that read the same taps) a 3-D
/// convolution splits into, one 2-D convolution each; past them it is one
/// over every tap that any output reads.
const MAX_DEPTH_RUNS: usize = 8;

/// The rank of an input, traced or constant.
fn rank_of(v: Option<&Option<V>>) -> Option<usize> {
    match v?.as_ref()? {
        V::T(x) => Some(x.rank()),
        V::C(c) => Some(c.dims.len()),
    }
}

/// One spatial axis of a pooling (`size` elements, padded by `begin` and
/// `end`, a window of `k` taps `d` apart moved by `s`): the windows, how
/// far the last reaches past the padded input (`ceil`: a last window
/// partly past it, one that starts inside the input or its start padding,
/// as PyTorch counts them), and the elements each window averages over:
/// its input's, its padding's too with `include`, never past the padded
/// input. A window of nothing to average is an error naming `axis`.
fn pool_axis(
    size: usize,
    (begin, end): (usize, usize),
    (k, s, d): (usize, usize, usize),
    ceil: bool,
    include: bool,
    axis: &str,
) -> R<(usize, usize, Vec<usize>)> {
    let reach = d * (k - 1) + 1;
    let padded = size + begin + end;
    let span = padded
        .checked_sub(reach)
        .ok_or_else(|| format!("the window's reach {reach} exceeds the padded input's {padded} along {axis}"))?;
    let mut n = span / s + 1;
    if ceil && span.div_ceil(s) * s < size + begin {
        n = span.div_ceil(s) + 1;
    }
    let past = ((n - 1) * s + reach).saturating_sub(padded);
    let (lo, hi) = if include { (0, padded) } else { (begin, begin + size) };
    // Taps t with lo <= o s + t d < hi.
    let counts: Vec<usize> = (0..n)
        .map(|o| {
            let at = o * s;
            let first = lo.saturating_sub(at).div_ceil(d);
            let last = hi.saturating_sub(at).div_ceil(d).min(k);
            last.saturating_sub(first)
        })
        .collect();
    if let Some(o) = counts.iter().position(|&c| c == 0) {
        return Err(format!("window {o} along {axis} holds only padding (pads {:?}, kernel {k})", [begin, end]));
    }
    Ok((n, past, counts))
}

/// `y` times a constant of `shape` broadcast to `y`'s (an average's scale
/// per output).
fn times_constant(g: &Graph, y: &Tensor, values: &[f64], shape: &[usize]) -> R<Tensor> {
    let c = nn(g.constant(values, &TensorSpec::new(shape, y.dtype())))?;
    nn(y.mul(&nn(c.broadcast_to(y.shape()))?))
}

/// `x` padded by `value` where `p`'s two ends of an axis differ, and the
/// padding both ends share, for the op to apply itself.
fn uneven(g: &Graph, x: &Tensor, p: &Pads, value: f64) -> R<(Tensor, [usize; 2])> {
    let mut x = x.clone();
    let mut common = [0usize; 2];
    for axis in 0..2 {
        common[axis] = p.begin[axis].min(p.end[axis]);
        let (b, e) = (p.begin[axis] - common[axis], p.end[axis] - common[axis]);
        if b + e > 0 {
            x = pad_axis(g, &x, 2 + axis, (b as i64, e as i64), "constant", value)?;
        }
    }
    Ok((x, common))
}

/// Numpy matmul: rank-1 operands are promoted, batch dimensions broadcast;
/// a `[..., K] x [K, N]` product with a 2-D right side is one GEMM over
/// the flattened rows.
fn matmul(a: &Tensor, b: &Tensor) -> R<Tensor> {
    let (ra, rb) = (a.rank(), b.rank());
    if ra == 0 || rb == 0 {
        return Err("MatMul of a scalar".into());
    }
    let a2 = if ra == 1 { nn(a.reshape(&[1, a.shape()[0] as i64]))? } else { a.clone() };
    let b2 = if rb == 1 { nn(b.reshape(&[b.shape()[0] as i64, 1]))? } else { b.clone() };
    let (m, k) = (a2.shape()[a2.rank() - 2], a2.shape()[a2.rank() - 1]);
    let n = b2.shape()[b2.rank() - 1];
    let y = if b2.rank() == 2 && a2.rank() > 2 {
        let lead: Vec<usize> = a2.shape()[..a2.rank() - 2].to_vec();
        let rows: usize = lead.iter().product::<usize>() * m;
        let flat = nn(a2.reshape(&[rows as i64, k as i64]))?;
        let y = nn(flat.matmul(&b2))?;
        let mut shape: Vec<i64> = lead.iter().map(|&d| d as i64).collect();
        shape.extend([m as i64, n as i64]);
        nn(y.reshape(&shape))?
    } else {
        let la = &a2.shape()[..a2.rank() - 2];
        let lb = &b2.shape()[..b2.rank() - 2];
        let lead = broadcast(la, lb)?;
        let fit = |x: &Tensor, rows: usize, cols: usize| -> R<Tensor> {
            let mut shape = lead.clone();
            shape.extend([rows, cols]);
            if x.shape() == shape.as_slice() { Ok(x.clone()) } else { nn(x.broadcast_to(&shape)) }
        };
        nn(fit(&a2, m, k)?.matmul(&fit(&b2, k, n)?))?
    };
    // Drop the promoted dimensions again.
    let mut shape: Vec<i64> = y.shape().iter().map(|&d| d as i64).collect();
    if rb == 1 {
        shape.pop();
    }
    if ra == 1 {
        let at = shape.len() - if rb == 1 { 1 } else { 2 };
        shape.remove(at);
    }
    if shape.len() == y.rank() { Ok(y) } else { nn(y.reshape(&shape)) }
}

#[cfg(test)]
mod tests {
    use super::{Const, gather_elements, gather_nd};

    fn c(dims: &[usize], vals: &[f64]) -> Const {
        Const { dims: dims.to_vec(), vals: vals.to_vec(), float: true }
    }

    // The examples of ONNX's operator documentation (its node tests feed
    // them as graph inputs, which the importer folds only as constants).
    #[test]
    fn gather_nd_of_constants_follows_onnx() {
        let data = c(&[2, 2, 2], &[0., 1., 2., 3., 4., 5., 6., 7.]);
        let out = gather_nd(&data, &c(&[2, 1, 2], &[0., 1., 1., 0.]), 0).unwrap();
        assert_eq!((out.dims, out.vals), (vec![2, 1, 2], vec![2., 3., 4., 5.]));
        let out = gather_nd(&data, &c(&[2, 1], &[1., 0.]), 1).unwrap();
        assert_eq!((out.dims, out.vals), (vec![2, 2], vec![2., 3., 4., 5.]));
        let square = c(&[2, 2], &[0., 1., 2., 3.]);
        let out = gather_nd(&square, &c(&[2, 2], &[0., 0., -1., 1.]), 0).unwrap();
        assert_eq!((out.dims, out.vals), (vec![2], vec![0., 3.]));
        assert!(gather_nd(&square, &c(&[1, 2], &[2., 0.]), 0).unwrap_err().contains("out of range"));
        assert!(gather_nd(&square, &c(&[1, 3], &[0., 0., 0.]), 0).unwrap_err().contains("do not fit"));
    }

    #[test]
    fn gather_elements_of_constants_follows_onnx() {
        let out = gather_elements(&c(&[2, 2], &[1., 2., 3., 4.]), &c(&[2, 2], &[0., 0., 1., 0.]), 1).unwrap();
        assert_eq!((out.dims, out.vals), (vec![2, 2], vec![1., 1., 4., 3.]));
        let data = c(&[3, 3], &[1., 2., 3., 4., 5., 6., 7., 8., 9.]);
        let out = gather_elements(&data, &c(&[2, 3], &[1., 2., 0., 2., 0., 0.]), 0).unwrap();
        assert_eq!((out.dims, out.vals), (vec![2, 3], vec![4., 8., 3., 7., 2., 3.]));
        let out = gather_elements(&data, &c(&[2, 3], &[-1., -2., 0., -2., 0., 0.]), 0).unwrap();
        assert_eq!(out.vals, vec![7., 5., 3., 4., 2., 3.]);
        assert!(gather_elements(&data, &c(&[1, 1], &[3.]), 0).unwrap_err().contains("out of range"));
        assert!(gather_elements(&data, &c(&[3], &[0., 0., 0.]), 0).unwrap_err().contains("rank"));
    }
}
