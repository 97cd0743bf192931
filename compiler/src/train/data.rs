//! Data that feeds any model's inputs.
//!
//! A model's [`Signature`] is read from its `hl` source before anything is
//! compiled: `@loss`'s arguments (the data inputs `@forward` takes, the
//! targets, and the dropout seed and offset where it has them) and
//! `@forward`'s output. A [`Dataset`] is loaded against it and refused, with
//! one error naming the input and both shapes and types, when it does not
//! fit:
//!
//! - **Tables**: CSV (`.csv`, `.csv.gz`), one example per row, the label
//!   last. The features are reshaped to the first input's shape (64
//!   features feed `[batch, 64]` or `[batch, 1, 8, 8]`) and scaled by the
//!   training split's largest magnitude.
//! - **Text** (`.txt`): next-token prediction. The vocabulary is the file's
//!   distinct characters, or its bytes when the model's output has exactly
//!   256 classes; token inputs are `[batch, context]` ids, or one-hot
//!   `[batch, context, classes]` floats; targets are the next tokens. The
//!   held-out split is the end of the file, evaluated on windows spread
//!   evenly over it; training draws random windows.
//! - **Arrays**: named tensors in a `.safetensors` file (`input0`,
//!   `input1`, ... or in file order), or one `.npy` file per input, the
//!   first dimension indexing examples.
//!
//! The dropout seed and offset are not data: the training loop passes the
//! run's seed and a per-step offset.

use crate::CompilerContext;
use crate::ir;
use crate::train::TrainError;
use aicf_runtime::{Tensor, artifact::DType};
use mlir_sys::{MlirBlock, MlirOperation, MlirValue};
use std::collections::{BTreeMap, BTreeSet};
use std::io::Read;
use std::path::{Path, PathBuf};

type Result<T, E = TrainError> = std::result::Result<T, E>;

pub mod augment;
pub mod images;

fn bad(message: impl Into<String>) -> TrainError {
    TrainError::Input(message.into())
}

/// What an input of `@loss` is to the training loop.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// An input `@forward` takes too (features, tokens).
    Data,
    /// What the loss compares the output with (labels, next tokens).
    Target,
    /// Dropout's seed and per-step offset (rank-0 i64, last).
    Seed,
    Offset,
}

/// One argument of `@loss`.
#[derive(Clone, Debug, PartialEq)]
pub struct Input {
    pub shape: Vec<usize>,
    pub dtype: DType,
    pub role: Role,
    /// The rows of the table this input indexes (an `hl.gather`'s indices
    /// in `@loss`: token ids of a vocabulary of that many), where it does.
    pub indexes: Option<usize>,
    /// The value that fills this input where the data has none for it
    /// (`@loss`'s argument attribute `hl.fill`: an imported Hugging Face
    /// model's `attention_mask`, all ones over a text's whole windows; its
    /// `token_type_ids`, zeros).
    pub fill: Option<f64>,
    /// The input's name where the model gives one (`hl.name`: an imported
    /// model's, ONNX's input names): arrays named so (`input_ids.npy`) are
    /// matched to it.
    pub name: Option<String>,
}

impl Input {
    pub(crate) fn describe(&self) -> String {
        describe(&self.shape, self.dtype)
    }
}

fn describe(shape: &[usize], dtype: DType) -> String {
    let dims: Vec<String> = shape.iter().map(usize::to_string).collect();
    format!("[{}] {}", dims.join(", "), format!("{dtype:?}").to_lowercase())
}

/// What a classifier's `@forward` output holds along its last axis.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Scores {
    /// Logits: what a cross-entropy takes (the usual output).
    #[default]
    Logits,
    /// Probabilities: `@forward` ends in a softmax over the last axis.
    Probabilities,
    /// Log-probabilities: `@forward` ends in a log-softmax over it.
    LogProbabilities,
}

impl Scores {
    /// Row `row`'s negative log-likelihood of class `label`.
    pub fn nll(self, row: &[f64], label: usize) -> f64 {
        let at = row.get(label).copied().unwrap_or(f64::NAN);
        match self {
            Scores::Logits => {
                let max = row.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                let sum: f64 = row.iter().map(|v| (v - max).exp()).sum();
                max + sum.ln() - at
            }
            // (A probability that underflowed to 0 in f32 counts as the
            // smallest one f32 holds: a confident mistake is a large loss,
            // not an infinite one that reads as divergence.)
            Scores::Probabilities => -at.max(f32::from_bits(1) as f64).ln(),
            Scores::LogProbabilities => -at,
        }
    }

    /// Row `row`'s probabilities.
    pub fn probabilities(self, row: &[f64]) -> Vec<f64> {
        match self {
            Scores::Logits => {
                let max = row.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                let exp: Vec<f64> = row.iter().map(|v| (v - max).exp()).collect();
                let sum: f64 = exp.iter().sum();
                exp.iter().map(|e| e / sum).collect()
            }
            Scores::Probabilities => row.to_vec(),
            Scores::LogProbabilities => row.iter().map(|v| v.exp()).collect(),
        }
    }
}

/// What a model takes and returns.
#[derive(Clone, Debug, PartialEq)]
pub struct Signature {
    /// `@loss`'s arguments, in order.
    pub inputs: Vec<Input>,
    /// `@forward`'s first result (the logits), when there is a `@forward`.
    pub output: Option<(Vec<usize>, DType)>,
    /// Whether that output is logits, or ends in a softmax or log-softmax
    /// over its last axis (while `@loss` takes the cross-entropy of the
    /// logits before it): how a score or a prediction reads it.
    pub scores: Scores,
    /// The label `@loss`'s cross-entropy leaves out (`ignore_index` of an
    /// `hl.cross_entropy` reading a target argument as its labels): data
    /// may hold it besides the classes, and evaluation skips its rows.
    pub ignore_index: Option<i64>,
    /// `(target, data)` @loss arguments where @loss reads the target as
    /// the next tokens of the data's ids, which it hands on as a model's
    /// labels (`concat(ids[:, :1], target[:, :-1])`: an imported Hugging
    /// Face causal LM, whose labels are the ids): targets given equal to
    /// the ids are refused.
    pub next_token_targets: Vec<(usize, usize)>,
    /// Whether `@loss` sets model state (a batch norm's running statistics:
    /// it normalizes by the batch's own, as PyTorch's training mode does)
    /// and is a mean cross-entropy alone: its held-out loss is then the
    /// cross-entropy of `@forward`'s logits (eval mode's).
    pub sets_state: bool,
    /// Whether `@loss` returns a mean cross-entropy and nothing else (not
    /// a sum, not one plus a penalty): its value is then comparable with a
    /// uniform guess's, ln(classes).
    pub mean_cross_entropy: bool,
    /// The parameters `@loss` never reads (itself or through the functions
    /// it calls): they get no gradient and keep their initial values. Each
    /// with whether `@forward` reads it (its predictions then use values
    /// training never changed).
    pub untrained: Vec<(String, bool)>,
}

impl Signature {
    /// Reads the signature from the `hl` module `source` (parsed and
    /// verified, nothing compiled).
    pub fn of_source(source: &str, name: &str) -> Result<Signature> {
        let ctx = CompilerContext::new();
        let module = ctx.parse(source, name)?;
        let raw = module.as_operation().to_raw();
        let mut loss = None;
        let mut forward = None;
        let mut ignore_candidates: Vec<(Vec<usize>, i64)> = Vec::new();
        let mut next_token_targets = Vec::new();
        let mut sets_state = false;
        let mut mean_cross_entropy = false;
        let mut index_bounds: Vec<Option<usize>> = Vec::new();
        let mut scores = Scores::Logits;
        let mut ce_of_output = false;
        let mut fills: Vec<Option<f64>> = Vec::new();
        let mut names: Vec<Option<String>> = Vec::new();
        let funcs = functions_by_name(raw);
        for (func, block) in ir::functions(raw) {
            // Lowered IR (memref arguments) is no model to train: its
            // tensors' shapes would read as nothing.
            let lowered = (0..unsafe { mlir_sys::mlirBlockGetNumArguments(block) }).any(|i| unsafe {
                mlir_sys::mlirTypeIsAMemRef(mlir_sys::mlirValueGetType(mlir_sys::mlirBlockGetArgument(block, i)))
            });
            if lowered {
                return Err(bad(format!(
                    "{name}: @{} takes buffers (memref): this is lowered ll IR; give the hl model (tensors) to train",
                    ir::string_attr(func, "sym_name").unwrap_or_default()
                )));
            }
            // A dynamic or unranked tensor read as a shape of nothing (an
            // "[] i1" input in the errors that followed).
            for i in 0..unsafe { mlir_sys::mlirBlockGetNumArguments(block) } {
                let ty = unsafe { mlir_sys::mlirValueGetType(mlir_sys::mlirBlockGetArgument(block, i)) };
                let is_tensor = unsafe { mlir_sys::mlirTypeIsATensor(ty) };
                if is_tensor
                    && !unsafe { mlir_sys::mlirTypeIsARankedTensor(ty) && mlir_sys::mlirShapedTypeHasStaticShape(ty) }
                {
                    return Err(bad(format!(
                        "{name}: @{}'s input #{i} is {}: a dynamic or unranked shape; AICF compiles static shapes \
                         (write the batch size, e.g. tensor<32x64xf32>; `--batch N` or hl-set-batch retargets it)",
                        ir::string_attr(func, "sym_name").unwrap_or_default(),
                        ir::type_text(ty)
                    )));
                }
            }
            let args: Vec<(Vec<usize>, DType)> = (0..unsafe { mlir_sys::mlirBlockGetNumArguments(block) })
                .map(|i| {
                    let s = ir::spec(unsafe { mlir_sys::mlirBlockGetArgument(block, i) });
                    (s.shape.clone(), runtime_dtype(s.dtype))
                })
                .collect();
            match ir::string_attr(func, "sym_name").as_deref() {
                Some("loss") => {
                    // Dropout's (and noise's) seed and offset are @loss's
                    // last two arguments, which the training loop passes;
                    // elsewhere they were taken for data ("1 arrays for the
                    // model's 3 inputs").
                    let n = args.len();
                    for o in ir::ops_of(block) {
                        if !matches!(ir::op_name(o).as_str(), "hl.dropout" | "hl.random_like") {
                            continue;
                        }
                        let reads = ir::operands(o);
                        let (Some(seed), Some(offset)) = (
                            reads.get(1).and_then(|&v| argument_index(v)),
                            reads.get(2).and_then(|&v| argument_index(v)),
                        ) else {
                            continue;
                        };
                        if n < 2 || (seed, offset) != (n - 2, n - 1) {
                            let at = crate::context::describe_location(unsafe {
                                melior::ir::Location::from_raw(ir::op_loc(o))
                            });
                            return Err(bad(format!(
                                "{at}: '{}' reads its seed and offset from @loss's arguments #{seed} and #{offset}; \
                                 the training loop passes them as @loss's last two arguments (the seed, then the \
                                 offset, each tensor<i64>): move them to the end of @loss's arguments",
                                ir::op_name(o)
                            )));
                        }
                    }
                    loss = Some(args);
                    fills = (0..unsafe { mlir_sys::mlirBlockGetNumArguments(block) })
                        .map(|i| ir::arg_float_attr(func, i as usize, "hl.fill"))
                        .collect();
                    names = (0..unsafe { mlir_sys::mlirBlockGetNumArguments(block) })
                        .map(|i| ir::arg_string_attr(func, i as usize, "hl.name"))
                        .collect();
                    // Inputs a gather reads as indices: the rows they index.
                    index_bounds = (0..unsafe { mlir_sys::mlirBlockGetNumArguments(block) })
                        .map(|i| rows_indexed(unsafe { mlir_sys::mlirBlockGetArgument(block, i) }, &funcs, 0))
                        .collect();
                    // (Only where @loss is a mean cross-entropy and nothing
                    // else, which the logits' cross-entropy reproduces.)
                    let returned = ir::ops_of(block)
                        .into_iter()
                        .rfind(|&o| ir::op_name(o) == "func.return")
                        .and_then(|r| ir::operands(r).first().copied())
                        .and_then(ir::producer)
                        .filter(|&p| ir::op_name(p) == "hl.cross_entropy");
                    let returns_cross_entropy = returned.is_some();
                    // (The reduction is an enum: 1, sum; it was read as
                    // text, which says `1 : i32`, so a sum was taken for a
                    // mean.)
                    mean_cross_entropy = returned.is_some_and(|p| ir::int_attr(p, "reduction").unwrap_or(0) != 1);
                    sets_state = returns_cross_entropy
                        && ir::ops_of(block).into_iter().any(|o| ir::op_name(o) == "hl.set_state");
                    // A cross-entropy of a softmax's output, or of @forward's
                    // (an imported classifier's Softmax output): training
                    // reads the output as logits, and so do its figures.
                    ce_of_output = ir::ops_of(block)
                        .into_iter()
                        .filter(|&o| ir::op_name(o) == "hl.cross_entropy")
                        .filter_map(|o| ir::operands(o).first().copied().and_then(ir::producer))
                        .any(|p| {
                            matches!(ir::op_name(p).as_str(), "hl.softmax" | "hl.log_softmax")
                                || (ir::op_name(p) == "func.call"
                                    && ir::attr_text(p, "callee").trim_start_matches('@') == "forward")
                        });
                    // (Of labels the data gives: a target argument,
                    // reshaped, cast, sliced or concatenated, as an
                    // imported loss reads it: nanoGPT's `targets.view(-1)`.
                    // Else a loss composed of ops, an imported NLL's: the
                    // labels compared with a negative constant, PyTorch's
                    // -100 or nanoGPT's -1. Which arguments are targets is
                    // known once @forward is: resolved below.)
                    let mut found: Vec<(Vec<usize>, i64)> = ir::ops_of(block)
                        .into_iter()
                        .filter(|&o| ir::op_name(o) == "hl.cross_entropy")
                        .filter_map(|o| {
                            let args = arguments_of(*ir::operands(o).get(1)?, 0)?;
                            Some((args, ir::int_attr(o, "ignore_index")?))
                        })
                        .collect();
                    found.extend(
                        ir::ops_of(block)
                            .into_iter()
                            .filter(|&o| ir::op_name(o) == "hl.compare" && ir::int_attr(o, "predicate") == Some(0))
                            .filter_map(|o| {
                                let [a, b] = ir::operands(o)[..] else { return None };
                                let v = splat_int(b).filter(|&v| v < 0 && !ir::spec(a).dtype.is_float())?;
                                Some((arguments_of(a, 0)?, v))
                            }),
                    );
                    ignore_candidates = found;
                    // `concat(arg d [:, :1], arg t [:, :-1])` along the sequence.
                    let sliced_argument = |v: MlirValue| {
                        let p = ir::producer(v).filter(|&p| ir::op_name(p) == "hl.slice")?;
                        let x = *ir::operands(p).first()?;
                        argument_index(x).map(|a| (a, ir::spec(x).shape, ir::spec(v).shape))
                    };
                    next_token_targets = ir::ops_of(block)
                        .into_iter()
                        .filter(|&o| ir::op_name(o) == "hl.concat" && ir::int_attr(o, "axis") == Some(1))
                        .filter_map(|o| {
                            let [first, rest] = ir::operands(o)[..] else { return None };
                            let (d, dshape, dcut) = sliced_argument(first)?;
                            let (t, tshape, tcut) = sliced_argument(rest)?;
                            let len = tshape.get(1)?.checked_sub(1)?;
                            (dshape == tshape && dcut.get(1) == Some(&1) && tcut.get(1) == Some(&len) && d != t)
                                .then_some((t, d))
                        })
                        .collect();
                }
                Some("forward") => {
                    let returned = ir::ops_of(block)
                        .into_iter()
                        .rfind(|&o| ir::op_name(o) == "func.return")
                        .and_then(|r| ir::operands(r).first().copied());
                    let results = returned.map(|v| {
                        let s = ir::spec(v);
                        (s.shape.clone(), runtime_dtype(s.dtype))
                    });
                    // A softmax (or log-softmax) over the last axis last.
                    if let Some(v) = returned
                        && let Some(p) = ir::producer(v)
                    {
                        let rank = ir::spec(v).shape.len() as i64;
                        let last = ir::int_attr(p, "axis").is_some_and(|a| a == rank - 1 || a == -1);
                        scores = match ir::op_name(p).as_str() {
                            "hl.softmax" if last => Scores::Probabilities,
                            "hl.log_softmax" if last => Scores::LogProbabilities,
                            _ => Scores::Logits,
                        };
                    }
                    forward = Some((args, results));
                }
                _ => {}
            }
        }
        let loss = loss.ok_or_else(|| bad(format!("{name}: the model has no @loss to train")))?;
        let data_inputs = forward.as_ref().map_or(1, |f| f.0.len());
        // The label a loss ignores: of a target, not of the data (a mask of
        // padded ids compared with -1 is no label).
        let ignore_index =
            ignore_candidates.iter().find(|(args, _)| args.iter().any(|&a| a >= data_inputs)).map(|(_, v)| *v);
        // @forward predicts from the data @loss trains on: the same inputs.
        if let Some((args, _)) = &forward {
            for (i, (f, l)) in args.iter().zip(&loss).enumerate() {
                if f != l {
                    return Err(bad(format!(
                        "{name}: @forward's input #{i} is {}, @loss's is {}: both take the same data",
                        describe(&f.0, f.1),
                        describe(&l.0, l.1)
                    )));
                }
            }
            if args.len() > loss.len() {
                return Err(bad(format!(
                    "{name}: @forward takes {} inputs, more than @loss's {}",
                    args.len(),
                    loss.len()
                )));
            }
        }
        let rng = loss.iter().rev().take_while(|(s, t)| s.is_empty() && *t == DType::I64).count();
        let rng = if rng >= 2 { 2 } else { 0 };
        let inputs = loss
            .iter()
            .enumerate()
            .map(|(i, (shape, dtype))| {
                let role = if i >= loss.len() - rng {
                    if i == loss.len() - rng { Role::Seed } else { Role::Offset }
                } else if i < data_inputs {
                    Role::Data
                } else {
                    Role::Target
                };
                Input {
                    shape: shape.clone(),
                    dtype: *dtype,
                    role,
                    indexes: index_bounds.get(i).copied().flatten(),
                    fill: fills.get(i).copied().flatten().filter(|_| role == Role::Data),
                    name: names.get(i).cloned().flatten(),
                }
            })
            .collect();
        let untrained = untrained_params(raw, &funcs);
        Ok(Signature {
            inputs,
            output: forward.and_then(|f| f.1),
            scores: if ce_of_output { Scores::Logits } else { scores },
            ignore_index,
            next_token_targets,
            sets_state,
            mean_cross_entropy,
            untrained,
        })
    }

    /// A note for each parameter training leaves at its initial values
    /// ([`Signature::untrained`]), for `name`, the model's file.
    pub fn untrained_notes(&self, name: &str) -> Vec<String> {
        let (read, unread): (Vec<_>, Vec<_>) = self.untrained.iter().partition(|(_, forward)| *forward);
        let list = |v: &[&(String, bool)]| v.iter().map(|(p, _)| format!("@{p}")).collect::<Vec<_>>().join(", ");
        let mut notes = Vec::new();
        if !read.is_empty() {
            let (it, keeps, its) = if read.len() == 1 { ("it", "keeps", "its") } else { ("they", "keep", "their") };
            notes.push(format!(
                "{name}: @forward reads {}, which @loss never reads: {it} {keeps} {its} initial values in \
                 training, and predictions use them (read {} in @loss too, or leave {} out of @forward)",
                list(&read),
                if read.len() == 1 { "it" } else { "them" },
                if read.len() == 1 { "it" } else { "them" },
            ));
        }
        if !unread.is_empty() {
            let (it, its, them) = if unread.len() == 1 {
                ("it never trains", "its hl.param", "it")
            } else {
                ("they never train", "their hl.params", "them")
            };
            notes.push(format!(
                "{name}: no function reads {}: {it} (leave out {its}, or read {them} in @loss)",
                list(&unread)
            ));
        }
        notes
    }

    /// The batch size: the first input's leading dimension.
    pub fn batch(&self) -> usize {
        self.inputs.first().and_then(|i| i.shape.first()).copied().unwrap_or(1)
    }

    /// The classes of the output's last dimension.
    pub fn classes(&self) -> Option<usize> {
        self.output.as_ref().and_then(|(s, _)| s.last().copied())
    }

    /// Whether `@loss` takes dropout's seed and offset.
    pub fn takes_rng(&self) -> bool {
        self.inputs.iter().any(|i| i.role == Role::Seed)
    }

    /// The inputs data feeds (data and targets), in order.
    pub fn fed(&self) -> Vec<&Input> {
        self.inputs.iter().filter(|i| matches!(i.role, Role::Data | Role::Target)).collect()
    }

    /// Whether a classifier's label `v` counts (is not the ignored one).
    pub fn counts_label(&self, v: f64) -> bool {
        self.ignore_index.is_none_or(|i| v != i as f64)
    }

    /// Whether the targets are class indices of the output (so accuracy
    /// and a cross-entropy of `@forward`'s logits mean something).
    pub fn classifies(&self) -> bool {
        let Some((out, _)) = &self.output else { return false };
        let targets: Vec<&Input> = self.inputs.iter().filter(|i| i.role == Role::Target).collect();
        matches!(targets[..], [t] if is_int(t.dtype) && t.shape[..] == out[..out.len().saturating_sub(1)])
    }
}

/// The function arguments `v` is made of by ops that move values alone (a
/// reshape, a cast, a slice, a concatenation with constants); `None`
/// where it is computed otherwise.
fn arguments_of(v: MlirValue, depth: usize) -> Option<Vec<usize>> {
    match ir::producer(v) {
        None => Some(vec![argument_index(v)?]),
        Some(_) if depth > 8 => None,
        Some(p) => match ir::op_name(p).as_str() {
            "hl.reshape" | "hl.cast" | "hl.slice" => arguments_of(*ir::operands(p).first()?, depth + 1),
            "hl.concat" => {
                let mut args = Vec::new();
                for &x in &ir::operands(p) {
                    match arguments_of(x, depth + 1) {
                        Some(a) => args.extend(a),
                        None if ir::producer(x).is_some_and(|q| ir::op_name(q) == "hl.constant") => {}
                        None => return None,
                    }
                }
                (!args.is_empty()).then_some(args)
            }
            _ => None,
        },
    }
}

/// The index of `v` among its function's arguments; `None` where an op
/// makes it.
fn argument_index(v: MlirValue) -> Option<usize> {
    ir::producer(v).is_none().then(|| usize::try_from(unsafe { mlir_sys::mlirBlockArgumentGetArgNumber(v) }).ok())?
}

/// The value of an integer splat constant (`hl.constant dense<-100>`).
fn splat_int(v: MlirValue) -> Option<i64> {
    let p = ir::producer(v).filter(|&p| ir::op_name(p) == "hl.constant")?;
    let text = ir::attr_text(p, "value");
    let inner = text.strip_prefix("dense<")?.split('>').next()?;
    inner.trim().parse().ok()
}

/// `module`'s functions with a body, by name.
fn functions_by_name(module: MlirOperation) -> BTreeMap<String, MlirBlock> {
    ir::functions(module).into_iter().filter_map(|(f, b)| Some((ir::string_attr(f, "sym_name")?, b))).collect()
}

/// The rows of the tables `v` indexes as a gather's indices: directly,
/// through reshapes, or as an argument of a called function (`@loss`
/// calling `@forward`); the fewest where several; `None` where none.
fn rows_indexed(v: MlirValue, funcs: &BTreeMap<String, MlirBlock>, depth: usize) -> Option<usize> {
    if depth > 8 {
        return None;
    }
    ir::users(v)
        .into_iter()
        .filter_map(|u| match ir::op_name(u).as_str() {
            "hl.gather" if ir::operands(u).get(1).is_some_and(|&x| ir::key(x) == ir::key(v)) => {
                let axis = usize::try_from(ir::int_attr(u, "axis")?).ok()?;
                ir::spec(*ir::operands(u).first()?).shape.get(axis).copied()
            }
            // Shape and type changes, and ONNX's wrap of a negative index
            // (`select(compare(i, 0), i + n, i)`, as an imported Gather
            // reads its indices): through a select's values only, not its
            // condition (a mask of ids choosing other indices is no index).
            "hl.reshape" | "hl.cast" => {
                rows_indexed(unsafe { mlir_sys::mlirOperationGetResult(u, 0) }, funcs, depth + 1)
            }
            // (An add only as the wrap's `i + n`, which a select takes: an
            // id shifted by other amounts indexes by other bounds.)
            "hl.add" => {
                let sum = unsafe { mlir_sys::mlirOperationGetResult(u, 0) };
                let users = ir::users(sum);
                (!users.is_empty() && users.iter().all(|&w| ir::op_name(w) == "hl.select"))
                    .then(|| rows_indexed(sum, funcs, depth + 1))
                    .flatten()
            }
            "hl.select" if ir::operands(u).iter().skip(1).any(|&x| ir::key(x) == ir::key(v)) => {
                rows_indexed(unsafe { mlir_sys::mlirOperationGetResult(u, 0) }, funcs, depth + 1)
            }
            "func.call" => {
                let block = funcs.get(&ir::flat_symbol(u, "callee")?)?;
                ir::operands(u)
                    .iter()
                    .enumerate()
                    .filter(|(i, x)| {
                        ir::key(**x) == ir::key(v)
                            && (*i as isize) < unsafe { mlir_sys::mlirBlockGetNumArguments(*block) }
                    })
                    .filter_map(|(i, _)| {
                        let arg = unsafe { mlir_sys::mlirBlockGetArgument(*block, i as isize) };
                        rows_indexed(arg, funcs, depth + 1)
                    })
                    .min()
            }
            _ => None,
        })
        .min()
}

/// The parameters of `module` that `@loss` never reads, directly or through
/// the functions it calls, each with whether `@forward` (or a function it
/// calls) reads it; in declaration order.
fn untrained_params(module: MlirOperation, functions: &BTreeMap<String, MlirBlock>) -> Vec<(String, bool)> {
    let body = unsafe { mlir_sys::mlirRegionGetFirstBlock(mlir_sys::mlirOperationGetRegion(module, 0)) };
    let declared: Vec<String> = ir::ops_of(body)
        .into_iter()
        .filter(|&o| ir::op_name(o) == "hl.param")
        .filter_map(|o| ir::string_attr(o, "sym_name"))
        .collect();
    // The parameters read from `root` on, through calls (each function once).
    let reads = |root: &str| {
        let (mut seen, mut read) = (BTreeSet::new(), BTreeSet::new());
        let mut todo = vec![root.to_string()];
        while let Some(f) = todo.pop() {
            let Some(&block) = functions.get(&f) else { continue };
            if !seen.insert(f) {
                continue;
            }
            let mut blocks = vec![block];
            while let Some(b) = blocks.pop() {
                for op in ir::ops_of(b) {
                    match ir::op_name(op).as_str() {
                        "hl.get_param" => read.extend(ir::flat_symbol(op, "name")),
                        "func.call" => todo.extend(ir::flat_symbol(op, "callee")),
                        _ => {}
                    }
                    // (Ops with regions: their bodies read too.)
                    for r in 0..unsafe { mlir_sys::mlirOperationGetNumRegions(op) } {
                        let mut inner =
                            unsafe { mlir_sys::mlirRegionGetFirstBlock(mlir_sys::mlirOperationGetRegion(op, r)) };
                        while !inner.ptr.is_null() {
                            blocks.push(inner);
                            inner = unsafe { mlir_sys::mlirBlockGetNextInRegion(inner) };
                        }
                    }
                }
            }
        }
        read
    };
    let (loss, forward) = (reads("loss"), reads("forward"));
    declared
        .into_iter()
        .filter(|p| !loss.contains(p))
        .map(|p| {
            let f = forward.contains(&p);
            (p, f)
        })
        .collect()
}

fn runtime_dtype(d: crate::types::DType) -> DType {
    use crate::types::DType as N;
    match d {
        N::F32 => DType::F32,
        N::F64 => DType::F64,
        N::I32 => DType::I32,
        N::I64 => DType::I64,
        N::I1 => DType::I1,
        N::F16 => DType::F16,
        N::BF16 => DType::BF16,
    }
}

fn is_int(d: DType) -> bool {
    matches!(d, DType::I32 | DType::I64 | DType::I1 | DType::U8)
}

/// Training or held-out examples.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Split {
    Train,
    HeldOut,
}

/// How to read a data set.
#[derive(Clone, Debug)]
pub struct DataOptions {
    /// Seeds the split of tables and arrays into training and held-out rows.
    pub seed: u64,
    /// The held-out fraction (tables and arrays: of the rows, seeded; text:
    /// the end of the file).
    pub val_split: f64,
    /// Text: training windows per epoch (default: as many as the training
    /// tokens fill once).
    pub windows_per_epoch: Option<usize>,
    /// Text: held-out windows evaluated each epoch, at most.
    pub eval_windows: usize,
    /// Tables: divide features by this instead of the training split's
    /// largest magnitude (evaluating a checkpoint: the scale it trained
    /// with).
    pub feature_scale: Option<f64>,
    /// Text: the vocabulary to read it with (a checkpoint's `vocabulary`:
    /// `bytes`, or its characters in id order) instead of the text's own
    /// characters; a character outside it is an error.
    pub vocabulary: Option<String>,
    /// Text: hold all of it out, none for training (scoring a checkpoint
    /// on a text it did not train on).
    pub whole_text: bool,
    /// Tables and arrays: standardize each feature (minus its mean over the
    /// training rows, over their standard deviation) instead of one scale
    /// for all (`aicf train --standardize`).
    pub standardize: bool,
    /// The per-feature statistics to standardize with instead of the
    /// training rows' (a checkpoint's `feature_standardize`, as
    /// [`Standardization::to_metadata`] writes it).
    pub feature_stats: Option<String>,
    /// The columns a checkpoint's run trained on (its [`COLUMNS_KEY`]): a
    /// table with a header is checked against them.
    pub columns: Option<String>,
    /// The classes by name a checkpoint's run read its labels as (its
    /// [`CLASSES_KEY`]).
    pub class_names: Option<String>,
    /// Tables: a regression's targets read as (y - mean) / deviation by the
    /// training rows' statistics (`aicf train --standardize-targets`), so
    /// that a network whose outputs start near 0 at a scale of 1 fits
    /// prices of 1e5; the checkpoint keeps them ([`TARGETS_KEY`]), and
    /// predictions are read back in the file's units.
    pub standardize_targets: bool,
    /// The target statistics to read targets with instead of the training
    /// rows' (a checkpoint's [`TARGETS_KEY`]).
    pub target_stats: Option<String>,
    /// Tables and arrays read for predictions (`aicf predict`): every row,
    /// in the file's order (none held out), and the targets may be absent
    /// (a table of features alone, arrays for the data inputs alone); those
    /// given are read as numbers and not checked (they feed nothing).
    pub predicting: bool,
    /// Read for a run that starts training (not a resume, an evaluation or
    /// a prediction): advice on how to read the data (8-bit images as 0 to
    /// 1) is for it alone, as a checkpoint's run read its data its way.
    pub starting: bool,
    /// Images: flip and crop each training example at random, each step
    /// (`aicf train --augment`).
    pub augment: augment::Augment,
    /// Tables: the header's column that is the label (`aicf train
    /// --label`), wherever it is; the rest are the features, in order.
    /// Recorded in checkpoints ([`LABEL_KEY`]).
    pub label: Option<String>,
}

/// Per-feature mean and standard deviation of a data input's values over
/// the training rows: each feature is read as (x - mean) / deviation (a
/// feature constant over the training rows keeps deviation 1).
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Standardization {
    pub mean: Vec<f64>,
    pub std: Vec<f64>,
}

/// The checkpoint metadata key of a run's [`Standardization`].
pub const STANDARDIZE_KEY: &str = "feature_standardize";

impl Standardization {
    /// Of `values` (`per` values an example), over the examples `rows`.
    fn of(values: &[f64], per: usize, rows: &[usize]) -> Self {
        let n = rows.len().max(1) as f64;
        let mut mean = vec![0f64; per];
        for &r in rows {
            for (m, v) in mean.iter_mut().zip(&values[r * per..(r + 1) * per]) {
                *m += v;
            }
        }
        mean.iter_mut().for_each(|m| *m /= n);
        let mut var = vec![0f64; per];
        for &r in rows {
            for ((s, v), m) in var.iter_mut().zip(&values[r * per..(r + 1) * per]).zip(&mean) {
                *s += (v - m) * (v - m);
            }
        }
        let std = var.iter().map(|s| (s / n).sqrt()).map(|d| if d > 0.0 && d.is_finite() { d } else { 1.0 }).collect();
        Standardization { mean, std }
    }

    fn apply(&self, values: &mut [f64]) {
        let per = self.mean.len().max(1);
        for example in values.chunks_mut(per) {
            for ((v, m), d) in example.iter_mut().zip(&self.mean).zip(&self.std) {
                *v = (*v - m) / d;
            }
        }
    }

    pub fn to_metadata(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }

    /// Reads a checkpoint's statistics for an input of `per` features.
    fn from_metadata(name: &str, text: &str, per: usize) -> Result<Self> {
        let s: Standardization = serde_json::from_str(text)
            .map_err(|e| bad(format!("{name}: the checkpoint's {STANDARDIZE_KEY} does not read ({e})")))?;
        if s.mean.len() != per || s.std.len() != per {
            return Err(bad(format!(
                "{name}: the checkpoint standardized {} features; this data has {per}",
                s.mean.len()
            )));
        }
        if s.mean.iter().any(|m| !m.is_finite()) || s.std.iter().any(|d| !(d.is_finite() && *d > 0.0)) {
            return Err(bad(format!(
                "{name}: the checkpoint's {STANDARDIZE_KEY} holds a mean or deviation that is no number"
            )));
        }
        Ok(s)
    }
}

/// Standardizes `values` (`per` an example) in place by `options`' given
/// statistics or the training rows', returning the checkpoint metadata
/// that reproduces it; `None` where `options` asks for neither.
fn standardize(
    name: &str,
    values: &mut [f64],
    per: usize,
    train: &[usize],
    options: &DataOptions,
) -> Result<Option<String>> {
    let stats = match (&options.feature_stats, options.standardize) {
        (Some(text), _) => Standardization::from_metadata(name, text, per)?,
        (None, true) => Standardization::of(values, per, train),
        (None, false) => return Ok(None),
    };
    stats.apply(values);
    Ok(Some(stats.to_metadata()))
}

impl Default for DataOptions {
    fn default() -> Self {
        DataOptions {
            seed: 0,
            val_split: 0.2,
            windows_per_epoch: None,
            eval_windows: 256,
            feature_scale: None,
            vocabulary: None,
            whole_text: false,
            standardize: false,
            feature_stats: None,
            columns: None,
            class_names: None,
            standardize_targets: false,
            target_stats: None,
            predicting: false,
            starting: false,
            augment: augment::Augment::default(),
            label: None,
        }
    }
}

/// One fed input's values, example by example.
struct Column {
    /// The input's shape without the batch dimension.
    shape: Vec<usize>,
    dtype: DType,
    /// Example `e`'s values: `values[e * per .. (e + 1) * per]`.
    values: Vec<f64>,
    /// Whether the values were divided by the data's `feature_scale`.
    scaled: bool,
}

impl Column {
    fn per(&self) -> usize {
        self.shape.iter().product()
    }
}

/// How many of a vocabulary's `size` tokens `tokens` holds.
fn distinct_tokens(tokens: &[u32], size: usize) -> usize {
    let mut seen = vec![false; size];
    for &t in tokens {
        if let Some(s) = seen.get_mut(t as usize) {
            *s = true;
        }
    }
    seen.iter().filter(|&&s| s).count()
}

/// A table of examples: CSV rows or arrays.
struct Rows {
    columns: Vec<Column>,
    train: Vec<usize>,
    held: Vec<usize>,
    /// Training rows an epoch takes (`Dataset::whole_batches`): the first
    /// of each epoch's shuffled order; all where None.
    train_cap: Option<usize>,
    /// Held-out rows scored (the first ones); all where None.
    held_cap: Option<usize>,
}

/// The vocabulary of a text.
#[derive(Clone, Debug, PartialEq)]
pub enum Vocab {
    /// The text's distinct characters, sorted.
    Chars(Vec<char>),
    Bytes,
}

struct Text {
    tokens: Vec<u32>,
    vocab: Vocab,
    /// Training tokens are `[0, split)`, held-out ones `[split, len)`.
    split: usize,
    context: usize,
    /// The token input: ids (`None`) or one-hot vectors of this width.
    one_hot: Option<usize>,
    token_dtype: DType,
    target_dtype: DType,
    /// Inputs filled with a value over each window (an attention mask's
    /// ones): (position among the fed inputs, value, dtype).
    filled: Vec<(usize, f64, DType)>,
    windows_per_epoch: usize,
    eval_windows: usize,
}

enum Kind {
    Rows(Rows),
    Text(Text),
}

/// A data set split into training and held-out examples, making the
/// batches of one model's fed inputs.
pub struct Dataset {
    kind: Kind,
    /// What was loaded, for reports (`1797 rows of 64 features + label`).
    pub description: String,
    /// Values recorded in checkpoints, so a resume reads the data the same
    /// way (`feature_scale`, the vocabulary).
    pub metadata: BTreeMap<String, String>,
    /// A value far outside the rest of the data, named ([`find_outlier`]):
    /// a typo in a file (`1e30` for `1.30`) that makes training diverge, or
    /// scales every other feature to nothing.
    pub outlier: Option<String>,
    /// Other things about the data a user should hear before training on
    /// it (regression targets far from unit scale).
    pub notes: Vec<String>,
    /// Whether a note says the inputs (or a feature) are far from unit
    /// scale: a run that then diverges is told to scale them, not only to
    /// lower the rate.
    pub unscaled: bool,
    /// Each example's name where the data names them (an image folder's
    /// paths): predictions write it beside each row.
    pub row_names: Option<Vec<String>>,
    /// The augmentation of training examples ([`DataOptions::augment`]).
    augment: Option<Augmenting>,
}

/// Checkpoint metadata: [`Dataset::values_digest`] of the data the run
/// trained on.
pub const VALUES_KEY: &str = "data_values";

/// Checkpoint metadata: [`Dataset::input_magnitude`] of the data the run
/// trained on.
pub const INPUT_MAGNITUDE_KEY: &str = "input_magnitude";

/// A note where data given to a checkpoint is read at a scale far from the
/// one its run trained on (`recorded`, [`INPUT_MAGNITUDE_KEY`]): arrays
/// divided already and divided again by a table's scale, or raw pixels
/// given to a model trained on pixels divided by 255. `None` within a
/// factor of 4.
pub fn other_magnitude(name: &str, recorded: Option<&String>, dataset: &Dataset) -> Option<String> {
    let trained: f64 = recorded?.parse().ok().filter(|m: &f64| m.is_finite() && *m > 0.0)?;
    // (Loaded to score, the data recorded it as a run would; to predict,
    // it is found here.)
    let now = match dataset.metadata.get(INPUT_MAGNITUDE_KEY).and_then(|m| m.parse().ok()) {
        Some(m) => m,
        None => dataset.input_magnitude()?,
    };
    let ratio = now / trained;
    if (0.25..=4.0).contains(&ratio) {
        return None;
    }
    Some(format!(
        "{name}: the model reads these features {}x {} than those its run trained on (at a scale of {}, 99% of \
         their magnitudes up to that, against {}): if they are the same kind of data, give them as the run's data \
         held them (scaled alike, the same columns in the same order), or the model's outputs on them mean little",
        super::rate_text(if ratio > 1.0 { ratio } else { 1.0 / ratio }),
        if ratio > 1.0 { "larger" } else { "smaller" },
        super::rate_text(now),
        super::rate_text(trained),
    ))
}

/// How many times the 99th percentile of a data set's nonzero magnitudes a
/// value must be to count as an outlier.
pub const OUTLIER_RATIO: f64 = 1e6;

/// The value of `rows`' float inputs (features, and float targets) farthest
/// beyond [`OUTLIER_RATIO`] times the 99th percentile of their nonzero
/// magnitudes, as the file holds it (a table's features before scaling by
/// `scale`): where it is and how far out.
fn find_outlier(names: &[String], rows: &Rows, scale: f64) -> Option<String> {
    let mut worst: Option<(f64, usize, usize, f64)> = None; // (ratio, column, position, value)
    for (c, column) in rows.columns.iter().enumerate() {
        if is_int(column.dtype) || column.values.is_empty() {
            continue;
        }
        // (From a sample of a million values at most: a copy of every
        // magnitude doubled the memory a large table took.)
        let Some(p99) = p99_magnitude(column) else { continue };
        let (position, largest) =
            column.values.iter().enumerate().max_by(|a, b| a.1.abs().total_cmp(&b.1.abs())).map(|(i, v)| (i, *v))?;
        let ratio = largest.abs() / p99;
        if ratio > OUTLIER_RATIO && worst.is_none_or(|w| ratio > w.0) {
            worst = Some((ratio, c, position, largest));
        }
    }
    let (ratio, c, position, value) = worst?;
    let column = &rows.columns[c];
    let per = column.per().max(1);
    // Features were divided by the scale; the model reads f32.
    let read = (if column.scaled { value * scale } else { value }) as f32;
    // One file per input (.npy), or one file for all.
    let name = names.get(c).or(names.first()).map_or("the data", String::as_str);
    let what = if per > 1 {
        format!("element {} of example {}", position % per, position / per)
    } else {
        format!("example {}", position / per)
    };
    Some(format!(
        "{name}: {what} (counting from 0) of input #{c} is {read:e}, {ratio:.1e} times the 99th percentile of the \
         input's magnitudes"
    ))
}

/// How many times the median feature's largest magnitude one feature's may
/// be before the data's features are said to be on different scales: a
/// digits table whose fourth pixel held uniform(0, 1000) noise (62 times
/// the others' 16) trained to 12.8% held out instead of 91%, as a table's
/// features share one scale.
pub const FEATURE_SCALE_RATIO: f64 = 50.0;

/// A feature of `rows`' float data inputs whose largest magnitude is over
/// [`FEATURE_SCALE_RATIO`] times the median feature's (nonzero ones), or
/// under the median's over that ratio (a feature of 0.1 beside ones of 100,
/// divided by one shared scale, reached 1e-3 and trained to 80% where
/// standardized features gave 98.6%): the one farthest out, where it is and
/// how far.
/// (`scale`: what a table's features were divided by, for the values as
/// the file holds them.)
fn find_feature_scales(names: &[String], rows: &Rows, scale: f64) -> Option<String> {
    // (ratio, column, feature, its largest magnitude, the median's, above)
    let mut worst: Option<(f64, usize, usize, f64, f64, bool)> = None;
    for (c, column) in rows.columns.iter().enumerate() {
        let per = column.per();
        if is_int(column.dtype) || !column.scaled || per < 2 || column.values.is_empty() {
            continue;
        }
        let mut largest = vec![0f64; per];
        for example in column.values.chunks(per) {
            for (l, v) in largest.iter_mut().zip(example) {
                *l = l.max(v.abs());
            }
        }
        let mut nonzero: Vec<f64> = largest.iter().copied().filter(|v| *v > 0.0).collect();
        if nonzero.len() < 2 {
            continue;
        }
        let at = nonzero.len() / 2;
        let (_, median, _) = nonzero.select_nth_unstable_by(at, f64::total_cmp);
        let median = *median;
        let (feature, top) = largest.iter().enumerate().max_by(|a, b| a.1.total_cmp(b.1)).map(|(i, v)| (i, *v))?;
        let ratio = top / median;
        if ratio > FEATURE_SCALE_RATIO && worst.is_none_or(|w| ratio > w.0) {
            worst = Some((ratio, c, feature, top, median, true));
        }
        // (All-zero features are no scale: left out, as above.)
        let smallest = largest.iter().enumerate().filter(|(_, v)| **v > 0.0).min_by(|a, b| a.1.total_cmp(b.1));
        if let Some((feature, &bottom)) = smallest {
            let ratio = median / bottom;
            if ratio > FEATURE_SCALE_RATIO && worst.is_none_or(|w| ratio > w.0) {
                worst = Some((ratio, c, feature, bottom, median, false));
            }
        }
    }
    let (ratio, c, feature, top, median, above) = worst?;
    let (top, median) = (top * scale, median * scale);
    let name = names.get(c).or(names.first()).map_or("the data", String::as_str);
    let why = if names.len() == 1 && names[0].to_lowercase().contains(".csv") {
        "a table's features are divided by one shared scale, so the others are all but lost"
    } else {
        "arrays train as they are"
    };
    let (how, why) = if above {
        (format!("reaches {top:.4e}, {ratio:.1e} times"), why)
    } else {
        (
            format!("reaches only {top:.4e}, 1/{ratio:.1e} of"),
            if why.starts_with("a table") {
                "a table's features are divided by one shared scale, so this one is all but lost"
            } else {
                why
            },
        )
    };
    Some(format!(
        "{name}: feature {feature} (counting from 0) of input #{c} {how} the median feature's largest magnitude \
         ({median:.4e}): training with --standardize reads each feature at mean 0 and deviation 1, as otherwise {why}"
    ))
}

/// A float data input whose values, as the model reads them, are far from
/// unit scale (the 99th percentile of their nonzero magnitudes above 1e3 or
/// below 1e-3): arrays train as they are, and a network initialized for
/// inputs of about 1 trained such digits to 7.8% held out at a loss of
/// 1e29, without a word. Said with the scale and what to do.
/// The 99th percentile of a column's nonzero magnitudes (`None`: all
/// zero), from a sample of at most about a million values (not a copy of
/// a large data set).
fn p99_magnitude(column: &Column) -> Option<f64> {
    // (Coprime with the features per example, so that every feature is
    // sampled, not one in lockstep with the stride.)
    let mut stride = (column.values.len() / (1 << 20)).max(1);
    let gcd = |mut a: usize, mut b: usize| {
        while b != 0 {
            (a, b) = (b, a % b);
        }
        a
    };
    while stride > 1 && gcd(stride, column.per().max(1)) != 1 {
        stride += 1;
    }
    let mut nonzero: Vec<f64> = column.values.iter().step_by(stride).map(|v| v.abs()).filter(|v| *v > 0.0).collect();
    if nonzero.is_empty() {
        return None;
    }
    let at = (nonzero.len() - 1) * 99 / 100;
    let (_, p99, _) = nonzero.select_nth_unstable_by(at, f64::total_cmp);
    Some(*p99)
}

fn find_input_scale(names: &[String], rows: &Rows) -> Option<String> {
    rows.columns.iter().enumerate().find_map(|(c, column)| {
        if !column.scaled || is_int(column.dtype) {
            return None;
        }
        let p99 = p99_magnitude(column)?;
        if (1e-3..=1e3).contains(&p99) {
            return None;
        }
        let name = names.get(c).or(names.first()).map_or("the data", String::as_str);
        Some(format!(
            "{name}: input #{c}'s values are at a scale of {p99:.1e} (99% of their magnitudes up to that), and \
             arrays train as they are; a network trains on inputs of about 1: --standardize reads each feature \
             at mean 0 and deviation 1 (or scale the array)"
        ))
    })
}

/// A classifier's training rows that hold labels of fewer classes than the
/// model predicts (a two-class table trained by a ten-class model): said,
/// as a text's unused vocabulary is, with the classes they hold.
fn find_missing_classes(name: &str, rows: &Rows, sig: &Signature) -> Option<String> {
    let classes = sig.classifies().then(|| sig.classes()).flatten()?;
    // The column the target role feeds (the fed inputs' order).
    let c = sig.fed().iter().position(|i| i.role == Role::Target)?;
    let labels = rows.columns.get(c)?;
    if labels.per() != 1 || rows.train.is_empty() {
        return None;
    }
    let mut seen = BTreeSet::new();
    for &r in &rows.train {
        let v = *labels.values.get(r)?;
        if sig.counts_label(v) {
            seen.insert(v as i64);
        }
    }
    if seen.is_empty() || seen.len() >= classes {
        return None;
    }
    let list: Vec<String> = seen.iter().take(10).map(i64::to_string).collect();
    let more = if seen.len() > 10 { ", ..." } else { "" };
    Some(format!(
        "{name}: the training rows hold {} of the model's {classes} classes ({}{more}); the others are never a target",
        count(seen.len(), "label", "labels"),
        list.join(", ")
    ))
}

/// Regression targets whose spread is far from 1 (a standard deviation
/// above 1e4 or below 1e-4): the squared error in f32 then overflows, stalls
/// or reads as perfect. Said with the spread.
fn find_target_scale(names: &[String], rows: &Rows) -> Option<String> {
    let (c, column) = rows.columns.iter().enumerate().next_back()?;
    if is_int(column.dtype) || column.scaled || column.values.is_empty() {
        return None;
    }
    let n = column.values.len() as f64;
    let mean = column.values.iter().sum::<f64>() / n;
    let deviation = (column.values.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / n).sqrt();
    let largest = column.values.iter().fold(0f64, |m, v| m.max(v.abs()));
    // (Targets around 5000, or spread by thousands, trained for 30 epochs
    // to a squared error of 9e5 without a word: a network's outputs start
    // near 0 and at a scale of 1.)
    let far = |x: f64| x > 1e3 || (x > 0.0 && x < 1e-4);
    if !(far(deviation) || mean.abs() > 1e3 || (deviation == 0.0 && far(largest))) {
        return None;
    }
    let name = names.get(c).or(names.last()).map_or("the data", String::as_str);
    let why = if far(deviation) || deviation == 0.0 {
        "a squared error at that scale overflows, stalls or reads as perfect in f32"
    } else {
        "a network's outputs start near 0, at a scale of 1, and take many steps to reach them"
    };
    Some(format!(
        "{name}: the targets (input #{c}) have mean {mean:.4e} and standard deviation {deviation:.4e}; {why}: \
         --standardize-targets reads them at mean 0 and deviation 1 (a table's; predictions come back in the file's \
         units), or scale them to about 1 yourself"
    ))
}

/// `n` and its noun, singular for 1: "1 row", "2 rows".
pub fn count(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// Whether the data file `path` is read as a text (`.txt`, in any case).
pub fn is_text(path: &Path) -> bool {
    // (Compressed too, as a table may be: `.txt.gz` was "not a data file".)
    path.file_name().is_some_and(|n| {
        let n = n.to_string_lossy().to_lowercase();
        n.ends_with(".txt") || n.ends_with(".txt.gz")
    })
}

/// Whether the data file `path`'s name ends in one of `endings` (in any
/// case).
fn ends_in(path: &Path, endings: &[&str]) -> bool {
    path.file_name().is_some_and(|n| {
        let n = n.to_string_lossy().to_lowercase();
        endings.iter().any(|e| n.ends_with(e))
    })
}

/// Whether the data file `path` is read as a table (`.csv`, `.csv.gz`).
pub fn is_table(path: &Path) -> bool {
    ends_in(path, &[".csv", ".csv.gz"])
}

/// Whether the data file `path` is read as examples in rows: a table or
/// arrays (`.safetensors`, `.npy`).
pub fn is_rows(path: &Path) -> bool {
    is_table(path) || ends_in(path, &[".safetensors", ".npy"])
}

/// How training examples are augmented.
struct Augmenting {
    how: augment::Augment,
    /// The image each example is.
    form: images::Form,
    /// The fed input that is the images.
    column: usize,
    /// What a pixel padded in reads as, each element of an example: 0, or
    /// where the images were standardized, 0 standardized (as torchvision
    /// pads black before `Normalize`).
    fill: Vec<f64>,
}

/// The image a data set of arrays feeds for `--augment`: its one float data
/// input's, where that is an image (`[C, H, W]`, `[H, W, C]` or `[H, W]`);
/// tables and texts are no images.
fn augmented_input(
    name: &str,
    table: bool,
    dataset: &Dataset,
    sig: &Signature,
    how: augment::Augment,
) -> Result<Augmenting> {
    let refused = |why: String| bad(format!("{name}: --augment {}: {why}", how.describe()));
    if !matches!(dataset.kind, Kind::Rows(_)) || table {
        return Err(refused(
            "it flips and crops images: an image folder, or arrays of images ([N, C, H, W] .npy or .safetensors)"
                .into(),
        ));
    }
    let fed = sig.fed();
    let images: Vec<usize> = (0..fed.len()).filter(|&i| fed[i].role == Role::Data && !is_int(fed[i].dtype)).collect();
    let [column] = images[..] else {
        return Err(refused(format!("it augments one float data input, and the model has {}", images.len())));
    };
    let input = fed[column];
    if input.shape.len() < 3 {
        return Err(refused(format!(
            "the model's input #{column} is {}, no image ([batch, C, H, W], [batch, H, W, C] or [batch, H, W])",
            input.describe()
        )));
    }
    let form = images::Form::of(name, input)?;
    // Per-element statistics move with the pixels a flip or crop moves: a
    // pixel would be read by another's mean and deviation.
    if dataset.metadata.contains_key(STANDARDIZE_KEY) {
        return Err(refused(
            "--standardize reads arrays per element, and a flip or crop moves each pixel to another's statistics: \
             standardize each channel in the arrays themselves (an image folder's --standardize is per channel)"
                .into(),
        ));
    }
    Ok(Augmenting { how, form, column, fill: vec![0.0; form.channels * form.height * form.width] })
}

/// The image folder `dir` ([`images`]) as rows: the images and their
/// classes (by name, recorded as a table's named labels are), the paths
/// naming the rows.
fn image_folder(paths: &[PathBuf], sig: &Signature, options: &DataOptions) -> Result<Dataset> {
    let Some(dir) = paths.first() else { return Err(bad("no data file given")) };
    let name = dir.display().to_string();
    let loaded = images::load(paths, sig, options)?;
    // Images are read as 0 to 1 whatever a checkpoint's table was divided
    // by (the digits' table by 16, their images' pixels by 255: both 0 to
    // 1).
    let mut options = DataOptions { feature_scale: None, ..options.clone() };
    // --standardize: per channel, as torchvision's Normalize (per pixel, a
    // corner that is always 0 would be read as 0 with a deviation of 1,
    // beside pixels divided by theirs).
    let mut split = loaded.split;
    let mut per_channel = None;
    if options.standardize
        && options.feature_stats.is_none()
        && let Some(images) = loaded.arrays.first()
    {
        let rows = images.shape.first().copied().unwrap_or(0);
        let (train, held) = split.take().unwrap_or_else(|| split_rows(rows, &options));
        let (stats, channels) = images::channel_stats(&images.values, loaded.shape, &train);
        let shown = |f: fn(&(f64, f64)) -> f64| channels.iter().map(|c| format!("{:.4}", f(c))).collect::<Vec<_>>();
        per_channel = Some(format!(
            "{name}: standardized per channel, as torchvision's Normalize(mean, std): mean ({}), std ({}) of the \
             training images",
            shown(|c| c.0).join(", "),
            shown(|c| c.1).join(", ")
        ));
        options.feature_stats = Some(stats.to_metadata());
        split = Some((train, held));
    }
    let mut dataset = rows_of_arrays(&name, loaded.arrays, sig, &options, split)?;
    dataset.notes.extend(per_channel);
    dataset.description = loaded.description;
    dataset.notes.splice(0..0, loaded.notes);
    if !loaded.classes.is_empty() {
        dataset.metadata.insert(CLASSES_KEY.into(), serde_json::to_string(&loaded.classes).unwrap_or_default());
    }
    dataset.metadata.insert(images::IMAGES_KEY.into(), loaded.form);
    if !options.augment.is_none() {
        // Standardized per channel: a padded pixel is black standardized.
        let per = loaded.shape.channels * loaded.shape.height * loaded.shape.width;
        let fill = match dataset.metadata.get(STANDARDIZE_KEY) {
            Some(text) => {
                let s = Standardization::from_metadata(&name, text, per)?;
                s.mean.iter().zip(&s.std).map(|(m, d)| -m / d).collect()
            }
            None => vec![0.0; per],
        };
        dataset.notes.extend(options.augment.caution(&name, loaded.shape));
        dataset.augment = Some(Augmenting { how: options.augment, form: loaded.shape, column: 0, fill });
    }
    if let Kind::Rows(rows) = &dataset.kind
        && !options.predicting
    {
        dataset.notes.extend(find_input_scale(&[name], rows));
    }
    dataset.row_names = Some(loaded.names);
    if !options.predicting {
        dataset.record_values();
    }
    Ok(dataset)
}

impl Dataset {
    /// Records in the metadata what a checkpoint keeps of the data a run
    /// trains on: its inputs' magnitude ([`INPUT_MAGNITUDE_KEY`]) and the
    /// digest of its values ([`VALUES_KEY`]).
    fn record_values(&mut self) {
        if let Some(m) = self.input_magnitude() {
            self.metadata.insert(INPUT_MAGNITUDE_KEY.into(), m.to_string());
        }
        if let Some(d) = self.values_digest() {
            self.metadata.insert(VALUES_KEY.into(), d);
        }
    }

    /// Loads `paths` for a model of signature `sig`, checking that every fed
    /// input fits.
    pub fn load(paths: &[PathBuf], sig: &Signature, options: &DataOptions) -> Result<Dataset> {
        let [first, ..] = paths else { return Err(bad("no data file given")) };
        let name = first.display().to_string();
        let ext = |p: &Path| p.file_name().map(|n| n.to_string_lossy().to_lowercase()).unwrap_or_default();
        let kind = ext(first);
        if !(0.0..1.0).contains(&options.val_split) {
            return Err(bad(format!("the held-out fraction {} is not in [0, 1)", options.val_split)));
        }
        if images::is_image_folder(first) {
            if let Some(other) = paths.get(1) {
                return Err(bad(format!(
                    "{}: one image folder is the data (a subfolder per class, or train/ and val/); give it alone",
                    other.display()
                )));
            }
            return image_folder(paths, sig, options);
        }
        // Images themselves (`aicf predict --data cat.jpg`).
        if paths.iter().all(|p| images::is_image(p)) {
            return image_folder(paths, sig, options);
        }
        if paths.len() > 1 && !paths.iter().all(|p| ext(p).ends_with(".npy")) {
            let other = paths.iter().find(|p| !ext(p).ends_with(".npy")).unwrap_or(first);
            return Err(bad(format!(
                "{}: several data files are read as .npy arrays (uncompressed), one per input; this one is not",
                other.display()
            )));
        }
        let table_file = kind.ends_with(".csv") || kind.ends_with(".csv.gz");
        if options.standardize_targets && !table_file {
            return Err(bad(format!(
                "{name}: --standardize-targets standardizes a table's regression targets (a CSV's last column); \
                 scale other targets in the files themselves"
            )));
        }
        let mut dataset = if table_file {
            table(first, sig, options)
        } else if is_text(first) {
            text(first, sig, options)
        } else if kind.ends_with(".safetensors") {
            // Predictions may read the data inputs alone.
            let fed = sig.fed();
            let data: Vec<&Input> = fed.iter().copied().filter(|i| i.role == Role::Data).collect();
            let arrays = match read_safetensors(first, &fed) {
                Err(e) if options.predicting && data.len() < fed.len() => read_safetensors(first, &data).map_err(|_| e),
                read => read,
            }?;
            rows_of_arrays(&name, arrays, sig, options, None)
        } else if kind.ends_with(".npy") {
            let arrays = paths.iter().map(|p| read_npy(p)).collect::<Result<Vec<_>>>()?;
            // (Several files, one array each: named together.)
            let names = paths.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ");
            rows_of_arrays(&names, arrays, sig, options, None)
        } else {
            Err(bad(format!(
                "{name}: not a data file AICF reads (.csv, .csv.gz, .txt, .txt.gz, .safetensors, .npy, or a folder \
                 of images)"
            )))
        }?;
        if let Kind::Rows(rows) = &dataset.kind {
            let scale = dataset.metadata.get("feature_scale").and_then(|s| s.parse().ok()).unwrap_or(1.0);
            let names: Vec<String> = if kind.ends_with(".npy") {
                paths.iter().map(|p| p.display().to_string()).collect()
            } else {
                vec![name.clone()]
            };
            // (A standardized input was checked before it was standardized.)
            if dataset.outlier.is_none() && !dataset.metadata.contains_key(STANDARDIZE_KEY) {
                dataset.outlier = find_outlier(&names, rows, scale);
            }
            let features = find_feature_scales(&names, rows, scale);
            // (An outlier, or one feature far out, is the cause: said. A
            // table's features are scaled to at most 1 by their largest.)
            let arrays = kind.ends_with(".npy") || kind.ends_with(".safetensors");
            let inputs = (arrays && dataset.outlier.is_none() && features.is_none())
                .then(|| find_input_scale(&names, rows))
                .flatten();
            dataset.unscaled = inputs.is_some() || features.is_some();
            dataset.notes.extend(inputs);
            dataset.notes.extend(features);
            // (Targets read for predictions feed nothing.)
            if !options.predicting {
                dataset.notes.extend(find_target_scale(&names, rows));
            }
        }
        if !options.predicting {
            dataset.record_values();
        }
        if !options.augment.is_none() {
            let augmenting = augmented_input(&name, is_table(first), &dataset, sig, options.augment)?;
            dataset.notes.extend(options.augment.caution(&name, augmenting.form));
            dataset.augment = Some(augmenting);
        }
        Ok(dataset)
    }

    /// Augments the training examples `examples` of a batch `fed` (as
    /// [`Dataset::batch`] made it) by the draws of `seed` at `step`, where
    /// the data asks for it ([`DataOptions::augment`]).
    pub fn augment(&self, fed: &mut [Tensor], examples: &[usize], seed: u64, step: u64) {
        let (Some(Augmenting { how, form, column, fill }), Kind::Rows(rows)) = (&self.augment, &self.kind) else {
            return;
        };
        let Some(t) = fed.get_mut(*column) else { return };
        let per = form.channels * form.height * form.width;
        for (k, example) in t.values.chunks_mut(per.max(1)).enumerate() {
            let Some(&row) = examples.get(k).and_then(|&e| rows.train.get(e)) else { break };
            how.apply(example, *form, fill, augment::key(seed, step, row));
        }
    }

    /// A note where a classifier's training rows hold labels of fewer
    /// classes than the model predicts (said by a training run; scoring a
    /// file of some classes is no such case). `name`: the data's.
    pub fn missing_classes(&self, name: &str, sig: &Signature) -> Option<String> {
        match &self.kind {
            Kind::Rows(rows) => find_missing_classes(name, rows, sig),
            Kind::Text(_) => None,
        }
    }

    /// A hash of every example's values as the model reads them (every
    /// row, in the file's order, whatever the split): the same for another
    /// file of the same rows read at the same scale. Rows only.
    pub fn values_digest(&self) -> Option<String> {
        let Kind::Rows(rows) = &self.kind else { return None };
        // (FNV-1a over the values' bits, as the files' hashes are, without
        // a copy of the data.)
        let mut h: u64 = 0xcbf29ce484222325;
        let mut eat = |word: u64| {
            for b in word.to_le_bytes() {
                h ^= b as u64;
                h = h.wrapping_mul(0x100000001b3);
            }
        };
        for c in &rows.columns {
            eat(c.values.len() as u64);
            c.values.iter().for_each(|v| eat(v.to_bits()));
        }
        Some(format!("{h:016x}"))
    }

    /// The 99th percentile of the nonzero magnitudes of input #0's values
    /// as the model reads them (a table's scaled, standardized), where it
    /// is a float input of rows: recorded by a training run
    /// ([`INPUT_MAGNITUDE_KEY`]), so that data of another scale given to
    /// its checkpoint is said.
    pub fn input_magnitude(&self) -> Option<f64> {
        match &self.kind {
            // (At least 256 values: a row or two to predict says little of
            // a scale.)
            Kind::Rows(rows) => {
                rows.columns.first().filter(|c| !is_int(c.dtype) && c.values.len() >= 256).and_then(p99_magnitude)
            }
            Kind::Text(_) => None,
        }
    }

    /// The largest magnitude of the float data inputs' values as they are
    /// read (after a table's scale), where there are any.
    pub fn largest_data(&self) -> Option<f64> {
        match &self.kind {
            Kind::Rows(rows) => {
                rows.columns.iter().filter(|c| c.scaled).flat_map(|c| c.values.iter()).map(|v| v.abs()).reduce(f64::max)
            }
            Kind::Text(_) => None,
        }
    }

    /// Training examples per epoch.
    pub fn train_len(&self) -> usize {
        match &self.kind {
            Kind::Rows(r) => r.train_cap.unwrap_or(r.train.len()).min(r.train.len()),
            Kind::Text(t) => t.windows_per_epoch,
        }
    }

    /// Every epoch in whole batches: `train_multiple` training examples
    /// (the global batch) and `batch` held-out ones, the rest left out, for
    /// a model whose ops fix its batch size (a smaller last batch cannot
    /// run; PyTorch's `drop_last`). A table's epoch leaves out the last
    /// rows of each epoch's shuffled order, other ones each epoch; a text
    /// takes fewer windows per epoch and scores fewer held-out ones.
    /// Returns how many of each are left out.
    pub fn whole_batches(&mut self, train_multiple: usize, batch: usize) -> (usize, usize) {
        let (train, held) = (self.train_len(), self.held_len());
        let keep_train = train - train % train_multiple.max(1);
        let keep_held = held - held % batch.max(1);
        match &mut self.kind {
            Kind::Rows(r) => {
                r.train_cap = Some(keep_train);
                r.held_cap = Some(keep_held);
            }
            Kind::Text(t) => {
                t.windows_per_epoch = keep_train;
                t.eval_windows = keep_held;
            }
        }
        (train - keep_train, held - keep_held)
    }

    /// A table's rows as loaded, both splits (the held-out split drew on
    /// all of them); a text's training and held-out windows.
    pub fn loaded_len(&self) -> usize {
        match &self.kind {
            Kind::Rows(r) => r.train.len() + r.held.len(),
            Kind::Text(t) => t.windows_per_epoch + t.held_windows(),
        }
    }

    /// Held-out examples.
    pub fn held_len(&self) -> usize {
        match &self.kind {
            Kind::Rows(r) => r.held_cap.unwrap_or(r.held.len()).min(r.held.len()),
            Kind::Text(t) => t.held_windows(),
        }
    }

    /// Whether each example is a window of text (the loss is per token).
    pub fn is_text(&self) -> bool {
        matches!(self.kind, Kind::Text(_))
    }

    /// A text's window (the tokens an example predicts); `None` for rows.
    pub fn window(&self) -> Option<usize> {
        match &self.kind {
            Kind::Text(t) => Some(t.context),
            Kind::Rows(_) => None,
        }
    }

    /// What the held-out loss is measured in.
    pub fn loss_unit(&self) -> &'static str {
        match &self.kind {
            Kind::Text(Text { vocab: Vocab::Chars(_), .. }) => "nats/char",
            Kind::Text(Text { vocab: Vocab::Bytes, .. }) => "nats/byte",
            Kind::Rows(_) => "nats",
        }
    }

    /// The training examples of one epoch, in an order drawn from `rng`
    /// (which advances): a shuffle of the rows, or random text windows.
    pub fn epoch_order(&self, rng: &mut u64) -> Vec<usize> {
        match &self.kind {
            Kind::Rows(r) => {
                let mut order: Vec<usize> = (0..r.train.len()).collect();
                shuffle(&mut order, rng);
                order.truncate(self.train_len());
                order
            }
            Kind::Text(t) => {
                let starts = (t.split - t.context).max(1);
                (0..t.windows_per_epoch).map(|_| (lcg(rng) >> 11) as usize % starts).collect()
            }
        }
    }

    /// The held-out examples, in batches of at most `batch` (the last one
    /// smaller where they do not divide).
    pub fn held_out(&self, batch: usize) -> Vec<Vec<usize>> {
        match &self.kind {
            Kind::Rows(_) => (0..self.held_len()).collect::<Vec<_>>().chunks(batch.max(1)).map(<[_]>::to_vec).collect(),
            Kind::Text(t) => {
                let windows: Vec<usize> = (0..t.held_windows()).collect();
                windows.chunks(batch.max(1)).map(<[_]>::to_vec).collect()
            }
        }
    }

    /// The fed inputs (data and targets, the signature's order) for
    /// `examples`: epoch positions of [`Dataset::epoch_order`]'s output
    /// (training; `order` maps them), or held-out examples.
    pub fn batch(&self, split: Split, examples: &[usize]) -> Vec<Tensor> {
        match &self.kind {
            Kind::Rows(r) => {
                let ids: Vec<usize> = examples
                    .iter()
                    .map(|&e| match split {
                        Split::Train => r.train[e],
                        Split::HeldOut => r.held[e],
                    })
                    .collect();
                r.columns
                    .iter()
                    .map(|c| {
                        let per = c.per();
                        let mut values = Vec::with_capacity(ids.len() * per);
                        for &i in &ids {
                            values.extend_from_slice(&c.values[i * per..(i + 1) * per]);
                        }
                        let mut shape = vec![ids.len()];
                        shape.extend_from_slice(&c.shape);
                        Tensor::new(shape, c.dtype, values)
                    })
                    .collect()
            }
            Kind::Text(t) => {
                let starts: Vec<usize> = match split {
                    Split::Train => examples.to_vec(),
                    Split::HeldOut => examples.iter().map(|&w| t.held_start(w)).collect(),
                };
                t.batch(&starts)
            }
        }
    }
}

/// The next state of the 64-bit LCG every data order is drawn from (the
/// same order on every run and machine).
fn lcg(state: &mut u64) -> u64 {
    *state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
    *state
}

/// A seeded Fisher-Yates shuffle on the LCG.
pub fn shuffle<T>(items: &mut [T], state: &mut u64) {
    for i in (1..items.len()).rev() {
        items.swap(i, (lcg(state) >> 33) as usize % (i + 1));
    }
}

/// The seeded split of `rows` examples into (training, held-out) ids: a
/// shuffle, the first `val_split` of it held out.
fn split_rows(rows: usize, options: &DataOptions) -> (Vec<usize>, Vec<usize>) {
    let (seed, val_split) = (options.seed, options.val_split);
    let mut order: Vec<usize> = (0..rows).collect();
    // Predictions are of every row, in the file's order.
    if options.predicting {
        return (order, Vec::new());
    }
    let mut state = seed ^ 0x2545F4914F6CDD1D;
    shuffle(&mut order, &mut state);
    let held = ((rows as f64) * val_split).round() as usize;
    let (h, t) = order.split_at(held);
    (t.to_vec(), h.to_vec())
}

/// The most windows of text an epoch takes (2^27: its order is 1 GiB).
const MOST_WINDOWS_PER_EPOCH: usize = 1 << 27;

/// Reads a whole file, gunzipping a `.gz` one: every member of it (files
/// joined with `cat`, bgzip's blocks), as `zcat` does; bytes after the last
/// member that are not another are an error, not ignored.
fn read_bytes(path: &Path) -> Result<Vec<u8>> {
    let mut bytes = Vec::new();
    open_data(path)?.read_to_end(&mut bytes).map_err(read_error(path))?;
    Ok(bytes)
}

/// Whether `path` is read decompressed (its name ends in `.gz`).
fn gzipped(path: &Path) -> bool {
    path.extension().is_some_and(|e| e.eq_ignore_ascii_case("gz"))
}

/// The error of a read of `path` through [`open_data`]'s reader.
fn read_error(path: &Path) -> impl Fn(std::io::Error) -> TrainError + '_ {
    move |e| TrainError::Io {
        path: path.to_path_buf(),
        message: if gzipped(path) { format!("not whole gzip data: {e}") } else { e.to_string() },
    }
}

/// A data file's bytes as a stream, decompressed where its name ends in
/// `.gz` (a table is parsed as it is read: held whole first, a 1.3 GB CSV
/// took twice its size before its rows were parsed).
fn open_data(path: &Path) -> Result<Box<dyn std::io::BufRead>> {
    use std::io::BufRead;
    let io = |e: std::io::Error| TrainError::Io { path: path.to_path_buf(), message: e.to_string() };
    let file = std::fs::File::open(path).map_err(io)?;
    if gzipped(path) {
        return Ok(Box::new(std::io::BufReader::new(flate2::read::MultiGzDecoder::new(std::io::BufReader::new(file)))));
    }
    let mut reader = std::io::BufReader::with_capacity(1 << 16, file);
    // Compressed data under a plain name read as text is "invalid
    // UTF-8" at some line: named for what it is.
    // (Text only: a binary format may begin with those two bytes.)
    let text = path.extension().is_some_and(|e| e.eq_ignore_ascii_case("csv") || e.eq_ignore_ascii_case("txt"));
    if text && reader.fill_buf().map_err(io)?.starts_with(&[0x1f, 0x8b]) {
        return Err(TrainError::Io {
            path: path.to_path_buf(),
            message: "gzip-compressed data under a name without .gz (name it so, as data.csv.gz, to be read \
                      decompressed)"
                .into(),
        });
    }
    Ok(Box::new(reader))
}

/// A table's bytes on their way to the CSV parser, each line's cells
/// counted by its commas: a line of more than `most` is an error once its
/// end is read (its whole width then known, the rest of it counted, not
/// held), where the parser holds its first `most` cells at most (a 2 MB
/// gzip of one row of 500 million cells grew past 24 GB).
struct WidthGuard<R> {
    inner: R,
    most: usize,
    line: usize,
    commas: usize,
    /// The separator counted (`,`, or what [`separator_of`] found).
    separator: u8,
    /// The first line past `most`: its cells (so far) and its line.
    wide: Option<(usize, usize)>,
}

impl<R: Read> Read for WidthGuard<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        loop {
            // (A read that fails within a wide line, a truncated gzip, is
            // that failure: the cells counted so far are not its width.)
            let n = self.inner.read(buf).inspect_err(|_| self.wide = None)?;
            for &b in &buf[..n] {
                match b {
                    // (A line ends at `\n` or at a lone `\r`, as the `csv`
                    // crate reads; lines are counted at `\n`.)
                    b'\n' | b'\r' if self.wide.is_some() => {
                        return Err(std::io::Error::other("a row too wide"));
                    }
                    b'\n' => (self.line, self.commas) = (self.line + 1, 0),
                    b'\r' => self.commas = 0,
                    b if b == self.separator => {
                        self.commas += 1;
                        if self.commas + 1 > self.most && self.wide.is_none() {
                            self.wide = Some((0, self.line));
                        }
                        if let Some(w) = &mut self.wide {
                            w.0 = self.commas + 1;
                        }
                    }
                    _ => {}
                }
            }
            match (self.wide, n) {
                // Past the limit: read on to the line's end (counted, not
                // held), which says its width.
                (Some(_), 0) => return Err(std::io::Error::other("a row too wide")),
                (Some(_), _) => continue,
                _ => return Ok(n),
            }
        }
    }
}

/// A text file's bytes without a leading UTF-8 byte-order mark (an
/// encoding's marker, not a character of the text: it became one of the
/// vocabulary's, as a CSV table's is dropped).
fn text_bytes(path: &Path) -> Result<Vec<u8>> {
    let mut bytes = read_bytes(path)?;
    if bytes.starts_with(&[0xef, 0xbb, 0xbf]) {
        bytes.drain(..3);
    }
    Ok(bytes)
}

/// The fed inputs of a table model: one data input (features) and one
/// target per example: a class index (integer), or a number to regress
/// (float).
fn table_inputs<'s>(sig: &'s Signature, name: &str) -> Result<(&'s Input, &'s Input)> {
    match sig.fed()[..] {
        // A label per row: [batch], or [batch, 1] (a regression's one
        // output column, as nn.Linear(n, 1) with MSELoss takes it).
        [x, y]
            if x.role == Role::Data
                && !x.shape.is_empty()
                && y.role == Role::Target
                && y.shape.get(1..).is_some_and(|d| d.iter().product::<usize>() == 1) =>
        {
            Ok((x, y))
        }
        _ => {
            let fed = sig.fed();
            let found: Vec<String> = fed.iter().map(|i| format!("{:?} {}", i.role, i.describe())).collect();
            // Token ids in, the next ids out: a language model reads a text.
            let text = matches!(fed.as_slice(), [x, y] if is_int(x.dtype) && x.shape == y.shape && x.shape.len() == 2);
            let instead = if text {
                "a language model (token ids in, the next ids as targets) trains on a text file: --data \
                 data/tinyshakespeare.txt"
            } else {
                "give one .npy array per input instead (--data x.npy --data y.npy, in @loss's order; numpy.save \
                 writes them)"
            };
            Err(bad(format!(
                "{name}: a CSV table (features, then a label per row) feeds a model of one input and one label of \
                 [batch] (or [batch, 1]); this model's @loss takes {}: {instead}",
                found.join(", ")
            )))
        }
    }
}

/// A CSV table's rows: features (row-major), the last column of each row,
/// the features per row, and each row's line in the file. `class_labels`:
/// every label must be a class index (a non-negative integer).
/// The most cells a table's row may have where no model says how many
/// (`aicf propose`): parsed, a cell takes about 30 bytes, so a row past this
/// would take gigabytes before any check could refuse it.
const MOST_CELLS: usize = 1 << 24;

/// A table's rows: features, labels, features per row, each row's line,
/// and the column names of a header row, skipped (a first row of names
/// alone, none of them a number: pandas' `to_csv(index=False)` of named
/// columns, a spreadsheet's export; it was refused).
/// `class_labels`: labels are class indices (or the loss's ignored label,
/// `Some(Some(i))`). `expect`: the cells a row must have where a model says
/// so, checked on each line as it is read, before the parser holds it
/// ([`WidthGuard`]). The file is parsed as it is read, never held whole.
/// `label`: the header's column read as the label (`--label`), moved last
/// in every row; where it `may_lack` it (features to predict from), a
/// header without it is read as it is.
fn parse_table(
    path: &Path,
    class_labels: Option<Option<i64>>,
    expect: Option<(usize, &dyn Fn(usize) -> String)>,
    unread_label: Option<usize>,
    named: Named<'_>,
    label: Option<(&str, bool)>,
) -> Result<(Vec<f64>, Vec<f64>, usize, Vec<u64>, Header)> {
    let name = path.display().to_string();
    // Commas in quotes count too: only a row far wider is refused there.
    let most = match expect {
        Some((e, _)) => e.saturating_mul(4).max(1 << 16),
        None => MOST_CELLS,
    };
    let separator = separator_of(path)?;
    let guard = WidthGuard { inner: open_data(path)?, most, line: 1, commas: 0, separator, wide: None };
    let mut reader =
        csv::ReaderBuilder::new().has_headers(false).flexible(true).delimiter(separator).from_reader(guard);
    // Under `;`, a decimal comma is the number's point (`1,5`: 1.5), as a
    // European spreadsheet writes it.
    let number = |c: &str| -> std::result::Result<f64, std::num::ParseFloatError> {
        match c.trim().parse::<f64>() {
            Err(_) if separator == b';' && c.contains(',') => c.trim().replace(',', ".").parse::<f64>(),
            r => r,
        }
    };
    // A row too wide (the guard's), or the file's own read error.
    let unread =
        |reader: &csv::Reader<WidthGuard<Box<dyn std::io::BufRead>>>, e: csv::Error| match reader.get_ref().wide {
            Some((cells, at)) => match expect {
                Some((_, refusal)) => bad(format!("{name}:{at}: {}", refusal(cells - 1))),
                None => bad(format!("{name}:{at}: {cells} cells, more than the {MOST_CELLS} a table's row may have")),
            },
            None => {
                let said = e.to_string();
                match e.into_kind() {
                    csv::ErrorKind::Io(e) => read_error(path)(e),
                    _ => bad(format!("{name}: {said}")),
                }
            }
        };
    let mut record = csv::StringRecord::new();
    let mut n = 0usize;
    let mut features: Vec<f64> = Vec::new();
    let mut labels: Vec<f64> = Vec::new();
    let mut width = None;
    let mut lines = Vec::new();
    let mut header: Option<Vec<String>> = None;
    // A first row of 0, 1, ..., n-1 narrower than pandas' names are taken
    // for without a look (six cells): its line, decided at the end.
    let mut numbered_first: Option<u64> = None;
    // Labels by name (`setosa`, `yes`, `True`): each name's class, in the
    // order first seen (sorted at the end), or the checkpoint's.
    let mut names_seen: Vec<String> = Vec::new();
    let mut by_name = false;
    // The label's column (`--label`), found in the first row; `None` after
    // it where a table to predict from lacks it.
    let mut label_at: Option<Option<usize>> = None;
    let label_given = label.is_some();
    loop {
        n += 1;
        match reader.read_record(&mut record) {
            Ok(true) => {}
            Ok(false) => break,
            Err(e) if matches!(e.kind(), csv::ErrorKind::Io(_)) => return Err(unread(&reader, e)),
            Err(e) => {
                // The record's line (blank lines counted), else its number.
                let line = e.position().map_or(n as u64, |p| p.line());
                // Not UTF-8: a spreadsheet's export in another encoding.
                let hint = if matches!(e.kind(), csv::ErrorKind::Utf8 { .. }) {
                    " (not UTF-8 text: a spreadsheet's export in Latin-1 or UTF-16? save it as CSV UTF-8, or convert \
                     it: iconv -f latin1 -t utf-8)"
                } else {
                    ""
                };
                return Err(bad(format!("{name}:{line}: {e}{hint}")));
            }
        }
        let line = record.position().map_or(n as u64, |p| p.line());
        let at = |message: String| bad(format!("{name}:{line}: {message}"));
        let blank = record.len() == 1 && record.iter().all(|c| c.trim().is_empty());
        // --label: its column, found by name in the header, goes last.
        if let Some((want, may_lack)) = label
            && !blank
        {
            if label_at.is_none() {
                let cells: Vec<&str> = record.iter().map(str::trim).collect();
                let same: Vec<usize> = (0..cells.len()).filter(|&i| cells[i] == want).collect();
                if let [first, second, ..] = same[..] {
                    return Err(at(format!(
                        "--label {want}: {} columns of that name (columns {} and {}{}): name the columns apart",
                        same.len(),
                        first + 1,
                        second + 1,
                        if same.len() > 2 { ", ..." } else { "" }
                    )));
                }
                let k = cells.iter().position(|c| *c == want).or_else(|| {
                    let alike: Vec<usize> = (0..cells.len()).filter(|&i| cells[i].eq_ignore_ascii_case(want)).collect();
                    (alike.len() == 1).then(|| alike[0])
                });
                if k.is_none() && !may_lack {
                    let shown: Vec<String> = cells.iter().take(8).map(|c| format!("'{c}'")).collect();
                    return Err(at(format!(
                        "--label {want}: no column of that name in the first row ({}{}); --label names a column of \
                         the header row",
                        shown.join(", "),
                        if cells.len() > 8 { ", ..." } else { "" }
                    )));
                }
                label_at = Some(k);
            }
            if let Some(Some(k)) = label_at
                && k + 1 < record.len()
            {
                let mut moved = csv::StringRecord::with_capacity(record.as_slice().len(), record.len());
                for (i, c) in record.iter().enumerate() {
                    if i != k {
                        moved.push_field(c);
                    }
                }
                moved.push_field(&record[k]);
                moved.set_position(record.position().cloned());
                record = moved;
            }
        }
        let record = &record;
        // A line of blanks is skipped; a row of empty cells (`,,,`) is a row
        // with nothing in it, named below.
        if blank {
            continue;
        }
        // A first row of names, none a number, is a header: skipped, and
        // said by the caller. (Names that are numbers are refused below: a
        // row of data they may be.)
        if lines.is_empty() && header.is_none() && record.len() >= 2 {
            let cells: Vec<&str> = record.iter().map(str::trim).collect();
            if cells.iter().all(|c| number(c).is_err()) && cells.iter().any(|c| c.chars().any(char::is_alphabetic)) {
                header = Some(cells.iter().map(|c| c.to_string()).collect());
                continue;
            }
        }
        // pandas' column names (`DataFrame(a).to_csv(index=False)` writes
        // 0, 1, ..., n-1 first; with its index, an empty cell before them)
        // are numbers, and were read as a row of data without a word (an
        // extra example, every prediction one row off).
        if lines.is_empty() && header.is_none() && record.len() >= 2 {
            let cells: Vec<&str> = record.iter().map(str::trim).collect();
            let indexed = cells[0].is_empty();
            let names = &cells[indexed as usize..];
            let numbered = names.iter().enumerate().all(|(i, c)| c.parse::<u64>().ok() == Some(i as u64));
            // (Narrower, such a row may well be data, `0,1` of y = x + 1:
            // read, and said where the rows below are not whole numbers.)
            if numbered && record.len() < 6 && !indexed {
                numbered_first = Some(line);
            } else if numbered {
                return Err(at(format!(
                    "the first row is {}0, 1, 2, ..., {}: the column names pandas writes (a header row{}); AICF \
                     reads tables of numbers alone: write it with to_csv(header=False, index=False), or remove the row",
                    if indexed { "an empty cell, then " } else { "" },
                    names.len() - 1,
                    if indexed { ", and an index column" } else { "" }
                )));
            }
        }
        // A label that is not read (predicting) is not parsed: "cat" there
        // was refused as a number.
        let unread = unread_label == Some(record.len());
        // Labels are names where the first row's is no number (or the
        // checkpoint's run read them so).
        let last = record.len().saturating_sub(1);
        if lines.is_empty() && !unread && record.len() >= 2 {
            by_name = match named {
                Named::Fixed(_) => true,
                // (Not on a missing value: `NA` is no class.)
                Named::Any => record.get(last).is_some_and(|c| {
                    number(c).is_err()
                        && !c.trim().is_empty()
                        && !MISSING_MARKS.iter().any(|m| c.trim().eq_ignore_ascii_case(m))
                }),
                Named::No => false,
            };
        }
        let values = record
            .iter()
            .enumerate()
            .map(|(column, c)| {
                if unread && column + 1 == record.len() {
                    return Ok(0.0);
                }
                if by_name && column == last {
                    let label = c.trim();
                    if label.is_empty() {
                        return Err(at(format!("column {} is empty: a row without its label", column + 1)));
                    }
                    return match named {
                        // A class's index reads as it (a `.npy` of predicted
                        // classes holds them), where no name is that text.
                        Named::Fixed(classes) => classes
                            .iter()
                            .position(|n| n == label)
                            .or_else(|| label.parse::<usize>().ok().filter(|&i| i < classes.len()))
                            .map(|i| i as f64)
                            .ok_or_else(|| {
                                at(format!(
                                    "the label '{}' is not among the classes the checkpoint's run trained on ({}), \
                                     nor a class index below {}",
                                    shown(label),
                                    classes.iter().map(|n| format!("'{}'", shown(n))).collect::<Vec<_>>().join(", "),
                                    classes.len()
                                ))
                            }),
                        _ => Ok(match names_seen.iter().position(|n| n == label) {
                            Some(i) => i as f64,
                            None => {
                                names_seen.push(label.to_string());
                                (names_seen.len() - 1) as f64
                            }
                        }),
                    };
                }
                number(c).map_err(|e| {
                    let cell = if c.trim().is_empty() { "empty".to_string() } else { format!("'{}': {e}", shown(c)) };
                    let numbers = record.iter().filter(|c| number(c).is_ok()).count();
                    let words = c.trim().chars().any(char::is_alphabetic);
                    let missing = c.trim().is_empty() || MISSING_MARKS.iter().any(|m| c.trim().eq_ignore_ascii_case(m));
                    let blank = record.iter().all(|c| c.trim().is_empty());
                    let hint = if blank {
                        " (a row of empty cells, as a spreadsheet writes below its data: remove it)"
                    } else if missing {
                        " (a missing value? AICF reads tables of numbers alone: fill it, with the column's mean or \
                         median as scikit-learn's SimpleImputer does, or drop the row)"
                    } else if column == 0 && c.trim_start().starts_with('#') {
                        " (a comment line? AICF reads tables of numbers alone: remove it)"
                    } else if separator == b','
                        && c.contains(',')
                        && c.trim().replace(',', "").parse::<f64>().is_ok()
                        && c.trim().split(',').skip(1).all(|g| g.len() == 3)
                    {
                        // A quoted number with thousands separators.
                        " (a number written with thousands separators? write it without them: 1257, not \"1,257\")"
                    } else if [';', '\t', '|'].iter().any(|s| c.contains(*s)) {
                        // Another separator (decimal commas may split it).
                        " (AICF reads comma-separated values, and this cell holds ';', a tab or '|': another \
                         separator?)"
                    } else if lines.is_empty() && numbers * 2 < record.len() && words {
                        // Words in most of a first row are a header, which a
                        // table here has not.
                        " (a header row? AICF reads tables of numbers alone, without one)"
                    } else if column + 1 == record.len() && numbers + 1 == record.len() && lines.is_empty() && words {
                        // Numbered feature columns and a named label column
                        // (pandas' to_csv), or a first label by name.
                        " (a header row, or labels by name? AICF reads tables of numbers alone, without a header, \
                         with class indices 0, 1, ... as labels)"
                    } else if column + 1 == record.len() && numbers + 1 == record.len() {
                        " (the last column is the label or target: class indices 0, 1, ... or numbers; map names to \
                         numbers first)"
                    } else if words {
                        // A column of categories among the numbers.
                        " (words among the numbers? AICF reads tables of numbers alone: a column of categories is \
                         encoded as numbers (category indices, or one column per category), or dropped)"
                    } else {
                        ""
                    };
                    // The column's name where a header gave one.
                    let named = header
                        .as_ref()
                        .and_then(|names| names.get(column))
                        .map_or(String::new(), |n| format!(" ('{}')", shown(n)));
                    at(format!("column {}{named} is {cell}{hint}", column + 1))
                })
            })
            .collect::<Result<Vec<f64>>>()?;
        if let Some(bad_cell) = values.iter().position(|v| !v.is_finite()) {
            let hint = if values[bad_cell].is_nan() {
                " (a missing value? fill it, with the column's mean or median, or drop the row)"
            } else {
                ""
            };
            return Err(at(format!("column {} is {}, not a finite number{hint}", bad_cell + 1, values[bad_cell])));
        }
        // The model computes in f32 (and at most f64 inputs, which read the
        // scaled features as f32 ones do).
        if let Some(bad_cell) = values.iter().position(|v| v.abs() > f32::MAX as f64) {
            return Err(at(format!(
                "column {} is {:e}, beyond the largest f32 ({:e})",
                bad_cell + 1,
                values[bad_cell],
                f32::MAX
            )));
        }
        let Some((&label, row)) = values.split_last() else { continue };
        match width {
            None => width = Some(row.len()),
            // (In columns: a table to predict from may have no label.)
            Some(w) if w != row.len() => {
                return Err(at(format!("{} columns, earlier rows have {}", row.len() + 1, w + 1)));
            }
            _ => {}
        }
        // An integer target is a class; a float one a regression target.
        let ignored = class_labels.flatten().is_some_and(|i| label == i as f64);
        if class_labels.is_some() && !ignored && (label.fract() != 0.0 || label < 0.0) {
            // (A regression's target given to a classifier: how to get
            // a model that fits it, said.)
            let why = if label.fract() != 0.0 {
                "; the model is a classifier (its @loss a cross-entropy over classes 0, 1, ...): a target of numbers \
                 needs a regression model (a mean squared error loss): `aicf propose --data FILE --task regression` \
                 writes one"
            } else if label == -100.0 {
                ": class indices count from 0; -100 is PyTorch's ignore_index, which an ONNX model's cross-entropy \
                 leaves out with --ignore-index -100"
            } else {
                ": class indices count from 0"
            };
            // A column named as the label elsewhere is the likelier cause.
            let elsewhere = header
                .as_deref()
                .filter(|_| !label_given)
                .and_then(|names| label_elsewhere(&name, names))
                .map(|n| format!(" ({})", n.trim_start_matches(&format!("{name}: "))))
                .unwrap_or_default();
            return Err(at(format!("the label {label} is not a class index{why}{elsewhere}")));
        }
        features.extend_from_slice(row);
        labels.push(label);
        lines.push(line);
    }
    // A narrow first row 0, 1, ..., n-1 above rows that are not all whole
    // numbers is likely pandas' column names of an unnamed frame (a table
    // of three columns trained on one row more, and predicted one row off),
    // said by the caller; it may also be data (`0,1` of y = x + 1), so it
    // is read. Above whole numbers alone it is said nothing of.
    if numbered_first.is_some() {
        let w = width.unwrap_or(0);
        let whole = |v: &f64| v.fract() == 0.0;
        let later = features.iter().skip(w).chain(labels.iter().skip(1));
        if lines.len() < 2 || { later }.all(whole) {
            numbered_first = None;
        }
    }
    // Classes by name are numbered in sorted order (scikit-learn's
    // LabelEncoder), whatever row each came first in.
    let class_names = match named {
        Named::Fixed(classes) if by_name => Some(classes.to_vec()),
        _ if by_name => {
            let mut sorted = names_seen.clone();
            sorted.sort();
            let new: Vec<f64> =
                names_seen.iter().map(|n| sorted.iter().position(|s| s == n).unwrap_or(0) as f64).collect();
            for l in &mut labels {
                *l = new[*l as usize];
            }
            Some(sorted)
        }
        _ => None,
    };
    Ok((features, labels, width.unwrap_or(0), lines, Header { names: header, numbered_first, class_names, separator }))
}

/// Whether a table's labels may be names of classes.
#[derive(Clone, Copy)]
enum Named<'a> {
    /// Numbers alone (a regression's targets, or predicting).
    No,
    /// Names where the first row's label is one (a classifier's first run,
    /// `aicf propose`).
    Any,
    /// The names of a checkpoint's run, in class order.
    Fixed(&'a [String]),
}

/// The separator of a table's cells, from its first line that holds
/// anything: the first of `,`, `;` (a European spreadsheet's CSV, whose
/// decimal commas are then points) and a tab that splits it, outside
/// quotes, into two cells or more that each read as a number (with a
/// decimal comma under `;`), are empty, are quoted, or hold none of the
/// others (a name); else `,` (whose errors then say what they hold).
fn separator_of(path: &Path) -> Result<u8> {
    use std::io::BufRead;
    let mut reader = open_data(path)?;
    let mut line = Vec::new();
    // (The first 64 KiB of a line are enough to judge; a read error is the
    // parse's to say.)
    while line.iter().all(|b: &u8| b.is_ascii_whitespace()) {
        line.clear();
        match (&mut reader).take(1 << 16).read_until(b'\n', &mut line) {
            Ok(0) | Err(_) => return Ok(b','),
            Ok(_) => {}
        }
    }
    let text = String::from_utf8_lossy(&line);
    let text = text.trim_start_matches('\u{feff}').trim_end_matches(['\r', '\n']);
    const CANDIDATES: [char; 3] = [',', ';', '\t'];
    // Cells split by `sep` outside quotes, each with whether it was quoted.
    let cells = |sep: char| {
        let mut out = vec![(String::new(), false)];
        let mut quoted = false;
        for ch in text.chars() {
            match ch {
                '"' => {
                    quoted = !quoted;
                    if let Some(last) = out.last_mut() {
                        last.1 = true;
                    }
                }
                c if c == sep && !quoted => out.push((String::new(), false)),
                c => {
                    if let Some(last) = out.last_mut() {
                        last.0.push(c);
                    }
                }
            }
        }
        out
    };
    let reads = |sep: char| {
        let split = cells(sep);
        split.len() >= 2
            && split.iter().all(|(cell, quoted)| {
                let c = cell.trim();
                let number = c.parse::<f64>().is_ok() || (sep == ';' && c.replace(',', ".").parse::<f64>().is_ok());
                *quoted || c.is_empty() || number || !c.contains(|x| CANDIDATES.contains(&x))
            })
    };
    Ok(CANDIDATES.into_iter().find(|&sep| reads(sep)).map_or(b',', |c| c as u8))
}

/// Cells that mark a missing value (pandas' `na_values`, R's `NA`, a
/// spreadsheet's `#N/A`): said as such, not as words among the numbers.
const MISSING_MARKS: [&str; 9] = ["NA", "N/A", "#N/A", "NaN", "null", "None", "?", "-", "missing"];

/// What a table's first row was: column names, skipped; or 0, 1, ..., n-1
/// above whole numbers alone, read as a row of data (its line), which may
/// be pandas' names.
struct Header {
    names: Option<Vec<String>>,
    numbered_first: Option<u64>,
    /// The classes' names, in class order, where labels were names.
    class_names: Option<Vec<String>>,
    /// The separator the cells were read with.
    separator: u8,
}

/// A cell of a file as an error shows it: control characters escaped (a
/// NUL or a terminal escape printed raw garbles the message), at most 40
/// characters (a tab-separated row is one cell).
fn shown(cell: &str) -> String {
    let escaped: String = cell.chars().flat_map(|c| c.escape_debug()).collect();
    match escaped.char_indices().nth(40) {
        Some((cut, _)) => format!("{}...", &escaped[..cut]),
        None => escaped,
    }
}

/// What a data file holds, read without a model (for `aicf propose`).
#[derive(Clone, Debug, PartialEq)]
pub struct Peek {
    /// `classification` (a CSV of integer labels), `regression` (a CSV of
    /// other targets) or `text`.
    pub task: String,
    /// Features per row (text: 1).
    pub features: usize,
    /// Classes (the largest label + 1), 1 (regression) or the text's
    /// distinct characters (256: bytes).
    pub outputs: usize,
    /// Rows (text: tokens).
    pub rows: usize,
    /// What the reading decided that the user may not expect, said with
    /// its cause: a table read as regression for a few targets that are no
    /// class, a text read as bytes for not being UTF-8.
    pub note: Option<String>,
    /// Why the file reads as its task where it might read as another
    /// (`file:51: the target -1 is no class index ...`), for errors.
    pub cause: Option<String>,
}

/// Reads `path` (a `.csv`, `.csv.gz`, `.txt` or `.txt.gz`) for its task
/// and shapes.
pub fn peek(path: &Path, label: Option<&str>) -> Result<Peek> {
    let name = path.display().to_string();
    let lower = name.to_lowercase();
    if is_text(path) {
        let bytes = text_bytes(path)?;
        let (size, rows, note) = match std::str::from_utf8(&bytes) {
            Ok(text) => {
                let mut chars: Vec<char> = text.chars().collect();
                let rows = chars.len();
                chars.sort_unstable();
                chars.dedup();
                (chars.len(), rows, None)
            }
            Err(e) => (
                256,
                bytes.len(),
                Some(format!("{name}: not UTF-8 text ({e}), so it is modelled as bytes (256 classes), not characters")),
            ),
        };
        if rows < 2 {
            return Err(bad(format!("{name}: {rows} characters, too few to predict the next one")));
        }
        return Ok(Peek { task: "text".into(), features: 1, outputs: size.max(2), rows, cause: note.clone(), note });
    }
    if !(lower.ends_with(".csv") || lower.ends_with(".csv.gz")) {
        return Err(bad(format!("{name}: propose reads a CSV table (.csv, .csv.gz) or a text (.txt)")));
    }
    let (_, labels, width, lines, Header { class_names, .. }) =
        parse_table(path, None, None, None, Named::Any, label.map(|l| (l, false)))?;
    if labels.is_empty() {
        return Err(bad(format!("{name}: no rows")));
    }
    if width == 0 {
        return Err(bad(format!("{name}: rows have a label and no features")));
    }
    let class = |l: &f64| l.fract() == 0.0 && *l >= 0.0 && *l < 65536.0;
    let (task, outputs, cause, note) = match labels.iter().position(|l| !class(l)) {
        None => {
            let c = labels.iter().fold(0.0f64, |m, &l| m.max(l)) as usize + 1;
            let note = class_names.map(|names| {
                format!(
                    "{name}: its labels are names, {} classes in sorted order ({}{})",
                    names.len(),
                    names.iter().take(8).map(|n| format!("'{n}'")).collect::<Vec<_>>().join(", "),
                    if names.len() > 8 { ", ..." } else { "" }
                )
            });
            ("classification", c.max(2), None, note)
        }
        Some(first) => {
            let others = labels.iter().filter(|l| !class(l)).count();
            let cause = format!(
                "{name}:{}: the target {} is no class index (a whole number from 0 to 65535); {others} of the {} \
                 rows' targets {} not",
                lines[first],
                labels[first],
                labels.len(),
                if others == 1 { "is" } else { "are" }
            );
            // Targets that are classes but for a few: a typo in a label
            // more likely than a regression, so the reading is said.
            // Whole numbers all, of a few values (-1 and 1, ids up to
            // 99999): classes numbered otherwise as likely as a regression,
            // so said too (not counts or prices of many values).
            let mut values: Vec<u64> = labels.iter().map(|l| l.to_bits()).collect();
            values.sort_unstable();
            values.dedup();
            let whole = values.len() <= 256 && labels.iter().all(|l| l.fract() == 0.0);
            let note = if others * 100 <= labels.len() {
                Some(format!(
                    "{cause}, so the table reads as a regression problem; if its last column holds classes, fix those rows"
                ))
            } else if whole {
                Some(format!(
                    "{cause}, so the table reads as a regression problem although every target is a whole number; if \
                     they are classes, number them from 0 (class indices run from 0 to 65535)"
                ))
            } else {
                None
            };
            ("regression", 1, Some(cause), note)
        }
    };
    Ok(Peek { task: task.into(), features: width, outputs, rows: labels.len(), note, cause })
}

fn table(path: &Path, sig: &Signature, options: &DataOptions) -> Result<Dataset> {
    let name = path.display().to_string();
    if !options.predicting {
        let (x, y) = table_inputs(sig, &name)?;
        return table_of(path, x, Some(y), sig, options).map(|(d, _)| d);
    }
    // Predictions read the one data input's features, and a label column
    // after them only where the model's target is one label per row (a
    // table for a model of other targets holds the features alone); the
    // targets, which feed nothing, are 0.
    let fed = sig.fed();
    let data: Vec<&Input> = fed.iter().copied().filter(|i| i.role == Role::Data).collect();
    let [x] = data[..] else {
        return Err(bad(format!(
            "{name}: a CSV table feeds a model of one data input; this model's @forward takes {}: give one .npy \
             array per input instead (--data x.npy --data ..., in @forward's order)",
            data.len()
        )));
    };
    if x.shape.is_empty() {
        return Err(bad(format!("{name}: the model's input #0 is a scalar; a table's rows feed a batch of rows")));
    }
    let label = match table_inputs(sig, &name) {
        Ok((_, y)) => Some(y),
        Err(_) => None,
    };
    let labelled = label.is_some();
    let (mut dataset, alone) = table_of(path, x, label, sig, options)?;
    // Read as the features alone where the model takes a label after them
    // too: said (a table missing a feature but keeping its label reads so).
    let per = x.shape[1..].iter().product::<usize>();
    if labelled && alone {
        dataset.notes.push(format!("{name}: rows of {per} columns are read as the features alone (no label column)"));
    }
    if let Kind::Rows(rows) = &mut dataset.kind {
        let n = rows.columns[0].values.len() / rows.columns[0].per().max(1);
        rows.columns.truncate(1);
        for t in fed.iter().filter(|i| i.role == Role::Target) {
            let shape = t.shape.get(1..).unwrap_or_default().to_vec();
            let values = vec![0.0; n * shape.iter().product::<usize>()];
            rows.columns.push(Column { shape, dtype: t.dtype, values, scaled: false });
        }
    }
    Ok(dataset)
}

/// A table's rows for the data input `x` and the label `y` after its
/// features (predicting: `None` where the model's targets are not one
/// label per row, so the rows hold the features alone), and whether the
/// rows held the features alone.
fn table_of(
    path: &Path,
    x: &Input,
    y: Option<&Input>,
    sig: &Signature,
    options: &DataOptions,
) -> Result<(Dataset, bool)> {
    let name = path.display().to_string();
    // (Predicting without a label: a column of its own, 0s, read as f32.)
    let unlabelled =
        Input { shape: vec![x.shape[0]], dtype: DType::F32, role: Role::Target, indexes: None, fill: None, name: None };
    let has_label = y.is_some();
    let y = y.unwrap_or(&unlabelled);
    let per: usize = x.shape[1..].iter().product();
    let predicting = options.predicting;
    let refusal = |width: usize| {
        if predicting {
            format!(
                "rows have {}; the model's input #0 is {}, which takes {per} features per row (a table to predict \
                 from holds them{})",
                count(width + 1, "column", "columns"),
                x.describe(),
                if has_label {
                    ", and may hold a label after them, which is not read"
                } else {
                    " alone: the model's targets are not one label per row"
                }
            )
        } else {
            format!(
                "rows have {width} features and a label; the model's input #0 is {}, which takes {per} features per \
                 row",
                x.describe()
            )
        }
    };
    // (Labels are checked as class indices only where they train or score.)
    let class_labels = (is_int(y.dtype) && !predicting).then_some(sig.ignore_index);
    let unread_label = (predicting && has_label).then_some(per + 1);
    // Labels by name: the checkpoint's classes, or, for a run that starts,
    // any (a resume or evaluation of a run that read numbers reads numbers).
    let trained_names: Option<Vec<String>> = match &options.class_names {
        Some(text) => Some(
            serde_json::from_str(text)
                .map_err(|e| bad(format!("{name}: the checkpoint's {CLASSES_KEY} does not read ({e})")))?,
        ),
        None => None,
    };
    let named = match (&trained_names, class_labels.is_some()) {
        (Some(classes), true) => Named::Fixed(classes),
        (None, true) if options.starting => Named::Any,
        _ => Named::No,
    };
    // (A table to predict from may hold the features alone.)
    let label = options.label.as_deref().map(|l| (l, predicting));
    let (mut features, mut labels, mut width, lines, Header { names: header, numbered_first, class_names, separator }) =
        parse_table(path, class_labels, Some((per + 1, &refusal)), unread_label, named, label)?;
    let rows = labels.len();
    if rows == 0 {
        return Err(bad(format!("{name}: no rows")));
    }
    // Features alone, to predict from: the last column, read as a label,
    // is the last feature; the labels, which feed nothing, are 0.
    let alone = predicting && width + 1 == per;
    if alone {
        let mut whole = Vec::with_capacity(rows * per);
        for (r, last) in labels.iter().enumerate() {
            whole.extend_from_slice(&features[r * width..(r + 1) * width]);
            whole.push(*last);
        }
        (features, labels, width) = (whole, vec![0.0; rows], per);
    }
    if width != per || (!has_label && !alone) {
        return Err(bad(format!("{name}: {}", refusal(width))));
    }
    // A first column counting the rows (pandas' index, written by
    // `to_csv()`) before the features, and no label: read as the first
    // feature, every feature one column off and the last one taken for the
    // label, without a word.
    let mut notes = Vec::new();
    match separator {
        b';' => notes
            .push(format!("{name}: read as values separated by ';' (its first line's), a decimal comma as a point")),
        b'\t' => notes.push(format!("{name}: read as values separated by tabs (its first line's)")),
        _ => {}
    }
    if let Some(line) = numbered_first {
        notes.push(format!(
            "{name}:{line}: the first row, 0, 1, ..., {width}, above rows of other numbers, is read as a row of data; \
             if it is pandas' column names (to_csv of a frame without names), remove it"
        ));
    }
    if let Some(names) = &header {
        let shown: Vec<&str> = names.iter().take(6).map(String::as_str).collect();
        let more = if names.len() > 6 { format!(", ... ({} names)", names.len()) } else { String::new() };
        notes.push(format!(
            "{name}: its first row ({}{more}) is read as the column names, not a row of data",
            shown.join(", ")
        ));
        if let Some(trained) = &options.columns {
            same_columns(&name, names, trained, per)?;
        } else if !predicting {
            notes.extend(label_elsewhere(&name, names));
        }
    }
    // The run's columns, for a prediction or evaluation to be checked
    // against (columns in another order were read by position).
    let mut column_names: Vec<(String, String)> = header
        .as_ref()
        .filter(|names| names.len() == per + 1)
        .map(|names| (COLUMNS_KEY.to_string(), serde_json::to_string(names).unwrap_or_default()))
        .into_iter()
        .collect();
    // (As the header spells it: --label survived found 'Survived'.)
    if let (Some(l), false) = (&options.label, predicting) {
        let spelled = header.as_ref().and_then(|names| names.last()).cloned().unwrap_or_else(|| l.clone());
        column_names.push((LABEL_KEY.to_string(), spelled));
    }
    // Classes by name: recorded (predictions write them, an evaluation or
    // resume reads labels by them), and said where the run starts.
    if let Some(classes) = &class_names {
        column_names.push((CLASSES_KEY.to_string(), serde_json::to_string(classes).unwrap_or_default()));
        if trained_names.is_none() {
            let shown: Vec<String> = classes.iter().take(8).enumerate().map(|(i, n)| format!("{i} = '{n}'")).collect();
            notes.push(format!(
                "{name}: its labels are names, read as classes in sorted order: {}{}",
                shown.join(", "),
                if classes.len() > 8 { format!(", ... ({} classes)", classes.len()) } else { String::new() }
            ));
        }
    }
    let counts = |from: f64| (0..rows).all(|r| features[r * width] == r as f64 + from);
    // (Not where the checkpoint's columns were checked above: its run
    // trained on that column as a feature, and said so then.)
    let checked = options.columns.is_some() && header.is_some();
    if predicting && has_label && !alone && !checked && rows >= 3 && width > 1 && (counts(0.0) || counts(1.0)) {
        notes.push(format!(
            "{name}: column 1 counts the rows ({}, {}, {}, ...): an index column? It is read as the first feature, and \
             the last column as a label (not read); write the table with to_csv(index=False)",
            features[0],
            features[width],
            features[2 * width]
        ));
    }
    // A first column of ids trains as a feature (a model that learns the
    // rows' numbers): said where it counts the rows, or is named as ids
    // and holds distinct whole numbers.
    if !predicting && width > 1 && rows >= 3 {
        let named = header.as_ref().and_then(|n| n.first()).filter(|n| id_like(n));
        let distinct = || {
            let mut ids: Vec<u64> = (0..rows).map(|r| features[r * width].to_bits()).collect();
            ids.sort_unstable();
            ids.dedup();
            ids.len() == rows && (0..rows).all(|r| features[r * width].fract() == 0.0)
        };
        if counts(0.0) || counts(1.0) || (named.is_some() && distinct()) {
            notes.push(format!(
                "{name}: column 1{} holds a different whole number in every row: an id column? It trains as a \
                 feature (the model may learn the rows' numbers); drop it",
                named.map_or(String::new(), |n| format!(" ('{n}')"))
            ));
        }
    }
    // A table's row is named by its line.
    if !predicting {
        if let Some(row) = bad_label(&labels, sig) {
            // Classes by name: the name, and how many the file has.
            if let Some(names) = &class_names {
                return Err(bad(format!(
                    "{name}:{}: the label '{}' is class {} of the {} names the file holds, and the model has {} \
                     classes: a model for this table has one output per name (`aicf propose --data {name}` writes \
                     one)",
                    lines[row],
                    names.get(labels[row] as usize).map_or("?", String::as_str),
                    labels[row],
                    names.len(),
                    sig.classes().unwrap_or(0)
                )));
            }
            return Err(bad(format!("{name}:{}: the label {} {}", lines[row], labels[row], no_class_of(&labels, sig))));
        }
        all_ignored(&name, &labels, sig)?;
    }
    let (train, held) = split_rows(rows, options);
    if train.is_empty() {
        return Err(bad(format!(
            "{name}: holding out {} of its {rows} rows (--val-split {}) leaves none to train on",
            held.len(),
            options.val_split
        )));
    }
    // A regression's targets standardized where asked (or as the
    // checkpoint's run read them); the labels a prediction does not read
    // are left alone.
    if options.standardize_targets || options.target_stats.is_some() {
        if is_int(y.dtype) || class_labels.is_some() {
            return Err(bad(format!(
                "{name}: --standardize-targets standardizes a regression's targets; this model's @loss takes class \
                 labels"
            )));
        }
        let per_y: usize = y.shape[1..].iter().product::<usize>().max(1);
        if !predicting {
            let stats = match &options.target_stats {
                Some(text) => Standardization::from_metadata(&name, text, per_y)?,
                None => Standardization::of(&labels, per_y, &train),
            };
            stats.apply(&mut labels);
            if options.target_stats.is_none() {
                notes.push(format!(
                    "{name}: the targets are standardized (mean {}, deviation {}): losses are of the standardized \
                     targets (a squared error of L is L x {:.4e} in the file's units), predictions are in the file's \
                     units",
                    shown_list(&stats.mean),
                    shown_list(&stats.std),
                    stats.std.first().map_or(1.0, |d| d * d)
                ));
            }
            column_names.push((TARGETS_KEY.to_string(), stats.to_metadata()));
        } else if let Some(text) = &options.target_stats {
            column_names.push((TARGETS_KEY.to_string(), text.clone()));
        }
    }
    // Integer features (token or category ids for a gather) are read as
    // the file holds them: scaled, an id of 5 read as 1 where the largest
    // was 5, training the wrong embedding rows without a word.
    if is_int(x.dtype) {
        if options.standardize {
            return Err(bad(format!(
                "{name}: --standardize reads each feature at mean 0 and deviation 1, but the model's input #0 is {}, \
                 integers (ids) that are read as they are: leave --standardize out",
                x.describe()
            )));
        }
        let (low, high) = if x.dtype == DType::I32 { (i32::MIN as f64, i32::MAX as f64) } else { (-9.2e18, 9.2e18) };
        if let Some(k) = features.iter().position(|v| v.fract() != 0.0 || !(low..=high).contains(v)) {
            return Err(bad(format!(
                "{name}:{}: column {} is {}, not a whole number the model's input #0 ({}) holds",
                lines[k / width],
                k % width + 1,
                features[k],
                x.describe()
            )));
        }
        // Ids a gather reads: in its table (the kernel's check named only
        // a position in a batch).
        if let Some(table) = x.indexes
            && let Some(k) = features.iter().position(|&v| v < 0.0 || v >= table as f64)
        {
            return Err(bad(format!(
                "{name}:{}: column {} is {}: the model's input #0 indexes a table of {table} rows (ids 0 to {})",
                lines[k / width],
                k % width + 1,
                features[k],
                table.saturating_sub(1)
            )));
        }
        let columns = vec![
            Column { shape: x.shape[1..].to_vec(), dtype: x.dtype, values: features, scaled: false },
            Column { shape: y.shape[1..].to_vec(), dtype: y.dtype, values: labels, scaled: false },
        ];
        return Ok((
            Dataset {
                description: format!(
                    "{} of {} (integers, read as they are) and a label ({name})",
                    count(rows, "row", "rows"),
                    count(width, "feature", "features")
                ),
                metadata: BTreeMap::from([("feature_scale".into(), "1".into())])
                    .into_iter()
                    .chain(column_names.clone())
                    .collect(),
                kind: Kind::Rows(Rows { columns, train, held, train_cap: None, held_cap: None }),
                outlier: None,
                notes: notes.clone(),
                unscaled: false,
                row_names: None,
                augment: None,
            },
            alone,
        ));
    }
    // Standardized feature by feature where asked (then no shared scale),
    // after the values as the file holds them are checked for an outlier
    // (standardized, a 1e30 typed for 1.30 is a few deviations out).
    if options.standardize || options.feature_stats.is_some() {
        let mut data = Rows {
            columns: vec![
                Column { shape: x.shape[1..].to_vec(), dtype: x.dtype, values: features, scaled: true },
                Column { shape: y.shape[1..].to_vec(), dtype: y.dtype, values: labels, scaled: false },
            ],
            train,
            held,
            train_cap: None,
            held_cap: None,
        };
        let outlier = find_outlier(std::slice::from_ref(&name), &data, 1.0);
        let stats = standardize(&name, &mut data.columns[0].values, width, &data.train, options)?;
        data.columns[0].scaled = false;
        let mut metadata = BTreeMap::from([("feature_scale".into(), "1".into())]);
        metadata.extend(stats.map(|s| (STANDARDIZE_KEY.to_string(), s)));
        metadata.extend(column_names.clone());
        return Ok((
            Dataset {
                description: format!(
                    "{} of {} (standardized) and a label ({name})",
                    count(rows, "row", "rows"),
                    count(width, "feature", "features")
                ),
                metadata,
                kind: Kind::Rows(data),
                outlier,
                notes: notes.clone(),
                unscaled: false,
                row_names: None,
                augment: None,
            },
            alone,
        ));
    }
    // Features scaled by the training split's largest magnitude.
    // By the largest magnitude itself, however small (a floor would leave
    // features of 1e-40 zero in f32); all-zero features teach nothing.
    let scale = match options.feature_scale {
        Some(s) => given_scale(&name, s)?,
        None => {
            let largest = train
                .iter()
                .flat_map(|&r| features[r * width..(r + 1) * width].iter())
                .fold(0.0f64, |m, v| m.max(v.abs()));
            if largest == 0.0 {
                return Err(bad(format!(
                    "{name}: every feature of the training rows is 0: there is nothing to learn from"
                )));
            }
            largest
        }
    };
    for v in &mut features {
        *v /= scale;
    }
    let columns = vec![
        Column { shape: x.shape[1..].to_vec(), dtype: x.dtype, values: features, scaled: true },
        Column { shape: y.shape[1..].to_vec(), dtype: y.dtype, values: labels, scaled: false },
    ];
    Ok((
        Dataset {
            description: format!(
                "{} of {} and a label ({name})",
                count(rows, "row", "rows"),
                count(width, "feature", "features")
            ),
            metadata: BTreeMap::from([("feature_scale".into(), scale.to_string())])
                .into_iter()
                .chain(column_names)
                .collect(),
            kind: Kind::Rows(Rows { columns, train, held, train_cap: None, held_cap: None }),
            outlier: None,
            notes,
            unscaled: false,
            row_names: None,
            augment: None,
        },
        alone,
    ))
}

/// Checkpoint metadata: a regression's target [`Standardization`]
/// (`--standardize-targets`): the model predicts `(y - mean) / std`.
pub const TARGETS_KEY: &str = "target_standardize";

/// Checkpoint metadata: the column a table's label was read from
/// (`--label`): eval, predict and a resume read the table so.
pub const LABEL_KEY: &str = "label_column";

/// Checkpoint metadata: the names of the classes of a table whose labels
/// were names (`setosa`, `yes`), in class order, as a JSON list.
pub const CLASSES_KEY: &str = "class_names";

/// Checkpoint metadata: the names of the columns of the table a run trained
/// on (its header row, features then the label), as a JSON list.
pub const COLUMNS_KEY: &str = "table_columns";

/// Refuses a table whose header `names` does not name the features the
/// checkpoint's run read (`trained`, [`COLUMNS_KEY`]; `per` features):
/// columns are read by position, so an id column before them, or the same
/// columns in another order, fed other features to each input of the model
/// without a word (a helper's Kaggle test: 98.6% became 51%).
fn same_columns(name: &str, names: &[String], trained: &str, per: usize) -> Result<()> {
    let Ok(trained) = serde_json::from_str::<Vec<String>>(trained) else { return Ok(()) };
    if trained.len() != per + 1 {
        return Ok(());
    }
    let features = &trained[..per];
    // The features alone, or with the label (whatever its name).
    let given = if names.len() == per { names } else { &names[..per.min(names.len())] };
    if given == features && (names.len() == per || names.len() == per + 1) {
        return Ok(());
    }
    let list = |v: &[String]| v.iter().map(|n| format!("'{n}'")).collect::<Vec<_>>().join(", ");
    let mut sorted_given: Vec<&String> = given.iter().collect();
    let mut sorted_trained: Vec<&String> = features.iter().collect();
    sorted_given.sort();
    sorted_trained.sort();
    let what = if sorted_given == sorted_trained && (names.len() == per || names.len() == per + 1) {
        "the same features in another order".to_string()
    } else {
        let extra: Vec<String> = names.iter().filter(|n| !trained.contains(n)).cloned().collect();
        let missing: Vec<String> = features.iter().filter(|n| !names.contains(n)).cloned().collect();
        let mut parts = Vec::new();
        if !extra.is_empty() {
            parts.push(format!("{} {} not among them", list(&extra), if extra.len() == 1 { "is" } else { "are" }));
        }
        if !missing.is_empty() {
            parts.push(format!("{} {} missing", list(&missing), if missing.len() == 1 { "is" } else { "are" }));
        }
        if parts.is_empty() { "other columns".to_string() } else { parts.join(", ") }
    };
    let case = if given.iter().map(|n| n.to_lowercase()).eq(features.iter().map(|n| n.to_lowercase())) {
        " (the names differ only in case)"
    } else {
        ""
    };
    Err(bad(format!(
        "{name}: its columns are not the features the checkpoint's run trained on ({}, then the label '{}'): \
         {what}{case}; columns are read by position, so give the features in that order (an id column dropped), or \
         remove the header row to have them read by position as they are",
        list(features),
        trained[per]
    )))
}

/// Whether a column's name says it holds ids (`id`, `PassengerId`,
/// `user_id`, pandas' `Unnamed: 0` index).
fn id_like(name: &str) -> bool {
    let lower = name.trim().to_lowercase();
    matches!(lower.as_str(), "id" | "index" | "unnamed: 0" | "row" | "row_id")
        || name.ends_with("Id")
        || name.ends_with("ID")
        || lower.ends_with("_id")
        || lower.ends_with(" id")
}

/// Up to four numbers of `v` as a note shows them.
fn shown_list(v: &[f64]) -> String {
    let shown: Vec<String> = v.iter().take(4).map(|x| format!("{x:.4e}")).collect();
    if v.len() > 4 { format!("{}, ...", shown.join(", ")) } else { shown.join(", ") }
}

/// Names of a label column: a note where one of them is not the last
/// column, which is the label a table's row is read with.
const LABEL_NAMES: [&str; 6] = ["label", "labels", "target", "class", "outcome", "survived"];

fn label_elsewhere(name: &str, names: &[String]) -> Option<String> {
    let is_label = |n: &str| LABEL_NAMES.contains(&n.to_lowercase().as_str());
    let last = names.last()?;
    if is_label(last) {
        return None;
    }
    let (i, found) = names.iter().enumerate().find(|(_, n)| is_label(n))?;
    Some(format!(
        "{name}: column {} is named '{found}', yet a table's label is its last column ('{last}' here): give --label \
         '{found}' (or move it last), or this model learns to predict '{last}'",
        i + 1
    ))
}

/// A feature scale handed in (a checkpoint's): a positive number.
fn given_scale(name: &str, scale: f64) -> Result<f64> {
    if scale.is_finite() && scale > 0.0 {
        Ok(scale)
    } else {
        Err(bad(format!("{name}: the feature scale {scale} (from the checkpoint) is not a positive number")))
    }
}

/// Labels must index the model's classes; `place` says where the `at`-th
/// value is (an example, or an element of one).
fn check_labels(name: &str, labels: &[f64], sig: &Signature, place: impl Fn(usize) -> String) -> Result<()> {
    if let Some(at) = bad_label(labels, sig) {
        return Err(bad(format!("{name}: {}: the label {} {}", place(at), labels[at], no_class_of(labels, sig))));
    }
    all_ignored(name, labels, sig)
}

/// Refuses labels that are all the loss's ignore_index: nothing would
/// train (the mean loss over no labelled example is NaN).
fn all_ignored(name: &str, labels: &[f64], sig: &Signature) -> Result<()> {
    match sig.ignore_index {
        Some(i) if sig.classifies() && !labels.is_empty() && labels.iter().all(|&v| !sig.counts_label(v)) => {
            Err(bad(format!("{name}: every label is {i}, the loss's ignore_index: nothing to train on")))
        }
        _ => Ok(()),
    }
}

/// [`no_class`], and where every label counts from 1 to the model's class
/// count (R's and MATLAB's classes, or a table's), that classes count from
/// 0 here.
fn no_class_of(labels: &[f64], sig: &Signature) -> String {
    let classes = sig.classes().unwrap_or(0) as f64;
    let counted: Vec<f64> = labels.iter().copied().filter(|&v| sig.counts_label(v)).collect();
    let from_one =
        classes > 1.0 && counted.iter().all(|&v| (1.0..=classes).contains(&v)) && counted.iter().any(|&v| v == classes);
    // (PyTorch's ignore_index, -100 in Hugging Face's padded labels, where
    // the model's loss has none.)
    let padded = sig.ignore_index.is_none() && labels.iter().any(|&v| v == -100.0);
    let hint = if from_one {
        format!(": the labels run from 1 to {classes}; classes count from 0 here, so subtract 1 from each label")
    } else if padded {
        ": -100 is PyTorch's ignore_index (Hugging Face's padding of labels); an ONNX model's cross-entropy leaves \
         it out with --ignore-index -100"
            .to_string()
    } else {
        String::new()
    };
    format!("{}{hint}", no_class(sig))
}

/// "is not a class of the model's N (0 to N-1[, nor its ignore_index I])".
fn no_class(sig: &Signature) -> String {
    let classes = sig.classes().unwrap_or(0);
    let ignored = sig.ignore_index.map_or(String::new(), |i| format!(", nor its ignore_index {i}"));
    // One class is no classifier: a model of one output trained by a
    // cross-entropy (an ONNX import's default loss) is a regression's.
    let one = if classes == 1 {
        ": a cross-entropy over one output is 0 whatever the label; a regression needs a squared error (an ONNX \
         model: import it with --loss mse), a classifier an output per class"
    } else {
        ""
    };
    format!("is not a class of the model's {classes} (0 to {}{ignored}){one}", classes.saturating_sub(1))
}

/// The first example whose label is no class of the model's (nor its
/// ignore_index), where it classifies.
fn bad_label(labels: &[f64], sig: &Signature) -> Option<usize> {
    let classes = sig.classifies().then(|| sig.classes()).flatten()?;
    labels.iter().position(|&v| sig.counts_label(v) && (v < 0.0 || v >= classes as f64))
}

fn text(path: &Path, sig: &Signature, options: &DataOptions) -> Result<Dataset> {
    let name = path.display().to_string();
    if options.standardize {
        return Err(bad(format!("{name}: --standardize standardizes the features of tables and arrays, not a text")));
    }
    let fed = sig.fed();
    // Inputs the model marks to be filled (an imported attention mask: a
    // text's windows are whole, all ones) take their value, not the text.
    let filled: Vec<(usize, f64, DType)> = fed
        .iter()
        .enumerate()
        .filter_map(|(k, i)| i.fill.filter(|_| k > 0 && i.shape[..] == fed[0].shape[..]).map(|v| (k, v, i.dtype)))
        .collect();
    let given: Vec<&Input> =
        fed.iter().enumerate().filter(|(k, _)| !filled.iter().any(|f| f.0 == *k)).map(|(_, i)| *i).collect();
    let [tokens_in, targets] = given[..] else {
        // (Hugging Face's models take an attention mask beside the ids: a
        // text's windows are whole, all ones.)
        let mask_too = fed.len() == 3 && fed.iter().all(|i| is_int(i.dtype) && i.shape == fed[0].shape);
        return Err(bad(format!(
            "{name}: text feeds a model of two inputs (tokens, next tokens); this model's @loss feeds {}{}",
            fed.len(),
            if mask_too {
                " (ids, another sequence and the targets: an ONNX model's input named attention_mask, as Hugging \
                 Face's, is filled with ones; export a model with an unnamed mask without it, a text's windows \
                 being whole, or give the three as --data arrays)"
            } else {
                ""
            }
        )));
    };
    let (batch, context) = match tokens_in.shape[..] {
        [b, t] if is_int(tokens_in.dtype) => (b, t),
        [b, t, _] if !is_int(tokens_in.dtype) => (b, t),
        _ => {
            return Err(bad(format!(
                "{name}: text feeds token ids [batch, context] or one-hot vectors [batch, context, vocabulary]; the \
                 model's input #0 is {}",
                tokens_in.describe()
            )));
        }
    };
    if targets.shape != [batch, context] || !is_int(targets.dtype) {
        return Err(bad(format!(
            "{name}: text's targets are the next tokens, [{batch}, {context}] integers; the model's input #1 is {}",
            targets.describe()
        )));
    }
    let classes = sig.classes().ok_or_else(|| bad(format!("{name}: the model has no @forward output to predict")))?;
    let bytes = text_bytes(path)?;
    // (It was "0 training tokens, fewer than one window".)
    if bytes.is_empty() {
        return Err(bad(format!(
            "{name}: the file is empty: a text to train on or score holds at least one window of tokens"
        )));
    }
    let vocab = if let Some(given) = &options.vocabulary {
        if given == "bytes" {
            Vocab::Bytes
        } else {
            let chars: Vec<char> = given.chars().collect();
            if chars.windows(2).any(|w| w[0] >= w[1]) {
                return Err(bad(format!("{name}: the vocabulary given is not sorted distinct characters")));
            }
            let text = std::str::from_utf8(&bytes).map_err(|e| bad(format!("{name}: not UTF-8 text ({e})")))?;
            if let Some((at, c)) = text.char_indices().find(|(_, c)| chars.binary_search(c).is_err()) {
                // Every character it lacks, with its count (the first alone
                // was named: fixed one run at a time), and the line of the
                // first.
                let mut missing: BTreeMap<char, usize> = BTreeMap::new();
                for c in text.chars().filter(|c| chars.binary_search(c).is_err()) {
                    *missing.entry(c).or_default() += 1;
                }
                let mut listed: Vec<(char, usize)> = missing.into_iter().collect();
                listed.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
                let shown: Vec<String> = listed.iter().take(12).map(|(c, n)| format!("{c:?} ({n})")).collect();
                let more = if listed.len() > 12 { format!(" and {} more", listed.len() - 12) } else { String::new() };
                let line = text[..at].matches('\n').count() + 1;
                // Windows line endings: '\r' before each '\n'.
                let crlf = if c == '\r' && text[at..].starts_with("\r\n") {
                    " (Windows line endings: convert them to '\\n', as the run's text had them)"
                } else {
                    ""
                };
                return Err(bad(format!(
                    "{name}: {} character{} not in the checkpoint's vocabulary of {} characters, the first {c:?} on \
                     line {line} (byte {at}){crlf}: {}{more} (times each occurs)",
                    listed.len(),
                    if listed.len() == 1 { " is" } else { "s are" },
                    chars.len(),
                    shown.join(", ")
                )));
            }
            Vocab::Chars(chars)
        }
    } else if classes == 256 {
        Vocab::Bytes
    } else {
        let text = std::str::from_utf8(&bytes).map_err(|e| bad(format!("{name}: not UTF-8 text ({e})")))?;
        // The distinct characters, without a copy of the text (a `char`
        // each, 4 bytes a character: a 285 MB text took 2.6 GB to read).
        let mut ascii = [false; 128];
        let mut other = std::collections::BTreeSet::new();
        for c in text.chars() {
            match ascii.get_mut(c as usize) {
                Some(seen) => *seen = true,
                None => {
                    other.insert(c);
                }
            }
        }
        let chars: Vec<char> = (0u8..128).filter(|&b| ascii[b as usize]).map(char::from).chain(other).collect();
        Vocab::Chars(chars)
    };
    let tokens: Vec<u32> = match &vocab {
        Vocab::Bytes => bytes.iter().map(|&b| b as u32).collect(),
        Vocab::Chars(chars) => {
            // (ASCII looked up in a table: one binary search a character
            // was most of the reading time.)
            let mut table = [u32::MAX; 128];
            for (i, &c) in chars.iter().enumerate().filter(|(_, c)| c.is_ascii()) {
                table[c as usize] = i as u32;
            }
            std::str::from_utf8(&bytes)
                .unwrap_or_default()
                .chars()
                .map(|c| match table.get(c as usize) {
                    Some(&i) if i != u32::MAX => i,
                    _ => chars.binary_search(&c).unwrap_or(0) as u32,
                })
                .collect()
        }
    };
    let crlf = bytes.windows(2).any(|w| w == b"\r\n");
    drop(bytes);
    let size = match &vocab {
        Vocab::Bytes => 256,
        Vocab::Chars(c) => c.len(),
    };
    if size > classes {
        // Which characters are too many: the rarest (what a user would
        // drop), a carriage return named as the line endings it is.
        let mut why = String::new();
        if let Vocab::Chars(chars) = &vocab
            && options.vocabulary.is_none()
        {
            let mut counts = vec![0usize; chars.len()];
            for &t in &tokens {
                counts[t as usize] += 1;
            }
            let mut order: Vec<usize> = (0..chars.len()).collect();
            order.sort_by_key(|&i| (counts[i], chars[i]));
            let rare: Vec<String> = order
                .iter()
                .take((size - classes).min(8))
                .map(|&i| format!("{:?} ({}x)", chars[i], counts[i]))
                .collect();
            why = format!(
                ": {} more than it predicts; the rarest: {}{}",
                size - classes,
                rare.join(", "),
                if size - classes > 8 { ", ..." } else { "" }
            );
            if chars.binary_search(&'\r').is_ok() {
                why.push_str(
                    "; '\\r' is Windows (CRLF) line endings: convert them to '\\n' (dos2unix, or tr -d '\\r')",
                );
            }
        }
        return Err(bad(format!(
            "{name}: the text has {size} distinct characters; the model predicts {classes} classes{why} (a model \
             of 256 classes reads any text as bytes)"
        )));
    }
    if let Some(&width) = tokens_in.shape.get(2)
        && width < size
    {
        return Err(bad(format!(
            "{name}: one-hot tokens of {size} symbols do not fit the model's input width {width}"
        )));
    }
    let held =
        if options.whole_text { tokens.len() } else { ((tokens.len() as f64) * options.val_split).round() as usize };
    let split = tokens.len() - held;
    if split < context + 1 && !options.whole_text {
        // Where the whole text would hold a window, the held-out share is
        // what took it.
        let hint = if tokens.len() > context && held > 0 {
            format!("; --val-split {} holds out {held} of its {} tokens", options.val_split, tokens.len())
        } else {
            String::new()
        };
        return Err(bad(format!(
            "{name}: {} training tokens, fewer than one window of {} (the context and the next token){hint}",
            split,
            context + 1
        )));
    }
    let windows_per_epoch = options.windows_per_epoch.unwrap_or_else(|| (split / context).max(batch));
    if windows_per_epoch == 0 {
        return Err(bad("zero windows per epoch"));
    }
    // An epoch's window order is held whole (8 bytes a window).
    if windows_per_epoch > MOST_WINDOWS_PER_EPOCH {
        return Err(bad(format!(
            "--windows-per-epoch {windows_per_epoch}: at most {MOST_WINDOWS_PER_EPOCH} (an epoch's order is held in \
             memory; train more epochs instead)"
        )));
    }
    let t = Text {
        tokens,
        vocab: vocab.clone(),
        split,
        context,
        one_hot: tokens_in.shape.get(2).copied(),
        token_dtype: tokens_in.dtype,
        target_dtype: targets.dtype,
        filled,
        windows_per_epoch,
        eval_windows: options.eval_windows,
    };
    let vocab_text = match &vocab {
        Vocab::Bytes => "bytes".to_string(),
        Vocab::Chars(c) => c.iter().collect::<String>(),
    };
    Ok(Dataset {
        description: format!(
            "{} of {} ({}), {} for training, {} held out; windows of {context}",
            count(t.tokens.len(), "token", "tokens"),
            name,
            // The byte values the text holds, of the 256 the model
            // predicts (every text was said to have 256).
            if vocab == Vocab::Bytes {
                format!("{} of 256", count(distinct_tokens(&t.tokens, 256), "byte value", "byte values"))
            } else {
                // (A vocabulary given, a checkpoint's: the text's own
                // characters, of it; its size was said as the text's. One
                // made from the text holds its characters alone.)
                let own = if options.vocabulary.is_some() { distinct_tokens(&t.tokens, size) } else { size };
                if own == size {
                    count(size, "distinct character", "distinct characters")
                } else {
                    format!(
                        "{} of the given vocabulary's {size}",
                        count(own, "distinct character", "distinct characters")
                    )
                }
            },
            split,
            t.tokens.len() - split
        ),
        // The run's held-out figures sample this many windows: scoring
        // (`aicf eval --eval-windows`) can take the same ones.
        metadata: BTreeMap::from([
            ("vocabulary".into(), vocab_text),
            ("eval_windows".into(), options.eval_windows.to_string()),
            // (A resume with another is said: an epoch is then another
            // amount of text.)
            ("windows_per_epoch".into(), windows_per_epoch.to_string()),
        ]),
        kind: Kind::Text(t),
        outlier: None,
        // A model of a larger vocabulary trains, but most of its classes
        // are never a target: said, as the model may be sized for another
        // text or tokenizer.
        notes: (size < classes)
            .then(|| {
                // A vocabulary given (a checkpoint's) is counted as such:
                // it was reported as the text's own characters.
                let what = match (&vocab, &options.vocabulary) {
                    (Vocab::Bytes, _) => format!("the text has {size} distinct byte values"),
                    (_, Some(_)) => format!("the vocabulary given (a checkpoint's) has {size} characters"),
                    (_, None) => format!("the text has {size} distinct characters"),
                };
                format!(
                    "{name}: {what}; the model predicts {classes} classes, so {} of them are never a target",
                    classes - size
                )
            })
            .into_iter()
            // Windows line endings: '\r' is a character of its own, which
            // the model then learns and writes (said: samples held stray
            // carriage returns).
            .chain(crlf.then(|| {
                format!(
                    "{name}: Windows line endings ('\\r\\n'): '\\r' is read as a character of its own, which the \
                     model learns and `aicf sample` writes; convert them to '\\n' (dos2unix) to train on the text alone"
                )
            }))
            .collect(),
        unscaled: false,
        row_names: None,
        augment: None,
    })
}

impl Text {
    /// The held-out text's whole windows (non-overlapping, from the split).
    fn held_available(&self) -> usize {
        (self.tokens.len() - self.split).saturating_sub(1) / self.context
    }

    /// Held-out windows: at most `eval_windows` of the held-out text's
    /// whole windows.
    fn held_windows(&self) -> usize {
        self.held_available().min(self.eval_windows)
    }

    /// Where held-out window `w` starts: the windows are spread evenly
    /// over the whole held-out text (all of them where there are no more
    /// than `eval_windows`). The first `eval_windows` in a row were a
    /// sample of one part of the text: on tiny Shakespeare an order-4
    /// character model scores 1.67 nats/char on the first 256 windows of
    /// 256 characters and 1.88 on the whole held-out text.
    fn held_start(&self, w: usize) -> usize {
        let (available, count) = (self.held_available(), self.held_windows().max(1));
        self.split + (w * available / count) * self.context
    }

    /// Windows starting at `starts`: the tokens, and the next tokens.
    fn batch(&self, starts: &[usize]) -> Vec<Tensor> {
        let (b, t) = (starts.len(), self.context);
        let mut targets = Vec::with_capacity(b * t);
        let inputs = match self.one_hot {
            None => {
                let mut ids = Vec::with_capacity(b * t);
                for &s in starts {
                    ids.extend(self.tokens[s..s + t].iter().map(|&v| v as f64));
                    targets.extend(self.tokens[s + 1..s + t + 1].iter().map(|&v| v as f64));
                }
                Tensor::new([b, t], self.token_dtype, ids)
            }
            Some(width) => {
                let mut hot = vec![0.0; b * t * width];
                for (w, &s) in starts.iter().enumerate() {
                    for (i, &v) in self.tokens[s..s + t].iter().enumerate() {
                        hot[(w * t + i) * width + v as usize] = 1.0;
                    }
                    targets.extend(self.tokens[s + 1..s + t + 1].iter().map(|&v| v as f64));
                }
                Tensor::new([b, t, width], self.token_dtype, hot)
            }
        };
        let mut fed = vec![inputs, Tensor::new([b, t], self.target_dtype, targets)];
        for &(k, value, dtype) in &self.filled {
            fed.insert(k, Tensor::new([b, t], dtype, vec![value; b * t]));
        }
        fed
    }
}

/// An array of a data file: its name, shape and values.
struct Array {
    name: String,
    /// The name it is matched to an input by: a `.npy` file's stem, a
    /// safetensors tensor's name (none for a stand-in).
    key: Option<String>,
    shape: Vec<usize>,
    values: Vec<f64>,
    /// Stored as 8-bit unsigned integers (images' 0 to 255).
    bytes: bool,
}

/// The arrays of a `.safetensors` file for the model's `fed` inputs:
/// `input0`, `input1`, ... where named so; else each tensor goes to the
/// one input its example shape fits. The file's own order decides nothing:
/// safetensors writers store tensors by element type and name, not in the
/// order they were given (a target stored before the features trained the
/// model to predict its inputs from its targets).
fn read_safetensors(path: &Path, fed: &[&Input]) -> Result<Vec<Array>> {
    let name = path.display().to_string();
    let bytes = read_bytes(path)?;
    let file = safetensors::SafeTensors::deserialize(&bytes)
        .map_err(|e| bad(format!("{name}: not a safetensors file ({})", safetensors_problem(&e))))?;
    let tensors: Vec<(String, safetensors::tensor::TensorView<'_>)> = file.tensors();
    let named: Option<Vec<usize>> =
        (0..fed.len()).map(|i| tensors.iter().position(|(n, _)| *n == format!("input{i}"))).collect();
    let order: Vec<usize> = match named {
        // Every input named: a tensor beside them is refused, as an extra
        // `.npy` file is (it was read as nothing, without a word).
        Some(order) if tensors.len() > order.len() => {
            let extra: Vec<String> =
                (0..tensors.len()).filter(|t| !order.contains(t)).map(|t| format!("'{}'", tensors[t].0)).collect();
            return Err(bad(format!(
                "{name}: {} tensors for the model's {} inputs ({}): {} would be read by none of them",
                tensors.len(),
                fed.len(),
                fed.iter().map(|i| i.describe()).collect::<Vec<_>>().join(", "),
                extra.join(", ")
            )));
        }
        Some(order) => order,
        // One tensor, or a count the caller names as wrong.
        None if tensors.len() <= 1 || tensors.len() != fed.len() => (0..tensors.len()).collect(),
        None => {
            let fits = |t: usize, i: usize| tensors[t].1.shape().get(1..) == fed[i].shape.get(1..);
            let places: Vec<Vec<usize>> =
                (0..tensors.len()).map(|t| (0..fed.len()).filter(|&i| fits(t, i)).collect()).collect();
            let describe = |i: usize| format!("#{i} {}", fed[i].describe());
            let inputs = (0..fed.len()).map(describe).collect::<Vec<_>>().join(", ");
            let names = |ts: &[usize]| ts.iter().map(|&t| format!("'{}'", tensors[t].0)).collect::<Vec<_>>().join(", ");
            let mut order = vec![usize::MAX; fed.len()];
            // A tensor named as an input (an imported model's
            // `input_ids`) is that input's; the rest go by shape.
            for (i, input) in fed.iter().enumerate() {
                if let Some(t) = input.name.as_ref().and_then(|n| tensors.iter().position(|(tn, _)| tn == n)) {
                    order[i] = t;
                }
            }
            let places: Vec<Vec<usize>> = places
                .iter()
                .enumerate()
                .map(|(t, p)| {
                    if order.contains(&t) {
                        Vec::new()
                    } else {
                        p.iter().copied().filter(|&i| order[i] == usize::MAX).collect()
                    }
                })
                .collect();
            for (t, p) in places.iter().enumerate() {
                if order.contains(&t) {
                    continue;
                }
                match p[..] {
                    [i] if order[i] == usize::MAX => order[i] = t,
                    [] => {
                        return Err(bad(format!(
                            "{name}: tensor '{}' of shape {:?} fits none of the model's inputs ({inputs})",
                            tensors[t].0,
                            tensors[t].1.shape()
                        )));
                    }
                    _ => {
                        let rivals: Vec<usize> =
                            (0..tensors.len()).filter(|&u| places[u].iter().any(|i| p.contains(i))).collect();
                        return Err(bad(format!(
                            "{name}: tensors {} fit the same inputs of the model ({inputs}), so which is which is not \
                             known: name them input0, input1, ... in the model's order",
                            names(&rivals)
                        )));
                    }
                }
            }
            order
        }
    };
    let mut out = Vec::new();
    for i in order {
        let (n, view) = &tensors[i];
        let values = safetensor_values(view).map_err(|m| bad(format!("{name}: tensor '{n}': {m}")))?;
        let bytes = view.dtype() == safetensors::Dtype::U8;
        out.push(Array {
            name: format!("{name}: tensor '{n}'"),
            key: Some(n.clone()),
            shape: view.shape().to_vec(),
            values,
            bytes,
        });
    }
    Ok(out)
}

/// The safetensors crate's error in words (its own Display prints the Rust
/// enum).
fn safetensors_problem(e: &safetensors::SafeTensorError) -> String {
    use safetensors::SafeTensorError as E;
    match e {
        E::InvalidHeader => "its header is not UTF-8 text".into(),
        E::InvalidHeaderStart => "its header does not start with '{'".into(),
        // (Also what an unknown "dtype" in valid JSON gives.)
        E::InvalidHeaderDeserialization => {
            "its header is not a safetensors header: not valid JSON, or a tensor's entry is not {dtype, shape, \
             data_offsets} with a dtype safetensors knows (F32, F16, BF16, F64, I64, I32, U8, BOOL, ...)"
                .into()
        }
        E::HeaderTooLarge => "its header declares more than 100 MB".into(),
        E::HeaderTooSmall => "shorter than the 8 bytes of the header's length".into(),
        E::InvalidHeaderLength => "the header's length passes the end of the file".into(),
        E::TensorNotFound(n) => format!("no tensor '{n}'"),
        E::TensorInvalidInfo => "a tensor's shape and type disagree with its offsets".into(),
        E::InvalidOffset(n) => format!("tensor '{n}': its offsets are not where the previous tensor ends"),
        E::IoError(e) => e.to_string(),
        E::JsonError(e) => format!("its header: {e}"),
        E::InvalidTensorView(dtype, shape, bytes) => {
            format!("a {dtype:?} tensor of shape {shape:?} cannot hold {bytes} bytes")
        }
        E::MetadataIncompleteBuffer => "the tensors do not cover the file's data (bytes left over or missing)".into(),
        E::ValidationOverflow => "a tensor's size overflows".into(),
    }
}

fn safetensor_values(view: &safetensors::tensor::TensorView<'_>) -> std::result::Result<Vec<f64>, String> {
    use safetensors::Dtype as D;
    let data = view.data();
    let words = |n: usize| data.chunks_exact(n);
    Ok(match view.dtype() {
        D::F32 => words(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]) as f64).collect(),
        D::F64 => words(8).map(|c| f64::from_le_bytes(c.try_into().unwrap_or_default())).collect(),
        D::I32 => words(4).map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]]) as f64).collect(),
        D::I64 => words(8).map(|c| i64::from_le_bytes(c.try_into().unwrap_or_default()) as f64).collect(),
        D::U8 => data.iter().map(|&b| b as f64).collect(),
        D::I8 => data.iter().map(|&b| b as i8 as f64).collect(),
        D::BOOL => data.iter().map(|&b| (b != 0) as u8 as f64).collect(),
        D::F16 => words(2).map(|c| half_f16(u16::from_le_bytes([c[0], c[1]]))).collect(),
        D::BF16 => words(2).map(|c| f32::from_bits((u16::from_le_bytes([c[0], c[1]]) as u32) << 16) as f64).collect(),
        D::I16 => words(2).map(|c| i16::from_le_bytes([c[0], c[1]]) as f64).collect(),
        D::U16 => words(2).map(|c| u16::from_le_bytes([c[0], c[1]]) as f64).collect(),
        D::U32 => words(4).map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]) as f64).collect(),
        D::U64 => words(8).map(|c| u64::from_le_bytes(c.try_into().unwrap_or_default()) as f64).collect(),
        other => {
            return Err(format!(
                "its element type {other:?} is not one AICF reads (F16, BF16, F32, F64, I8 to I64, U8 to U64, \
                 BOOL): convert it first (x.float(), or x.astype(np.float32))"
            ));
        }
    })
}

/// IEEE half precision to f64.
fn half_f16(bits: u16) -> f64 {
    let sign = if bits >> 15 == 1 { -1.0 } else { 1.0 };
    let exp = ((bits >> 10) & 0x1f) as i32;
    let frac = (bits & 0x3ff) as f64;
    sign * match exp {
        0 => frac * 2f64.powi(-24),
        31 if frac == 0.0 => f64::INFINITY,
        31 => f64::NAN,
        e => (1.0 + frac / 1024.0) * 2f64.powi(e - 15),
    }
}

fn read_npy(path: &Path) -> Result<Array> {
    let name = path.display().to_string();
    let bytes = read_bytes(path)?;
    npy_shape_fits(&bytes).map_err(|e| bad(format!("{name}: {e}")))?;
    let npy = npyz::NpyFile::new(&bytes[..]).map_err(|e| {
        // (npyz says "failed to fill whole buffer" of a cut header.)
        let why = if e.kind() == std::io::ErrorKind::UnexpectedEof {
            "its header is cut short".to_string()
        } else {
            e.to_string()
        };
        bad(format!("{name}: not a .npy file ({why})"))
    })?;
    let shape: Vec<usize> = npy.shape().iter().map(|&d| d as usize).collect();
    let dtype = npy.dtype();
    let fortran = npy.order() == npyz::Order::Fortran;
    let fail = |e: std::io::Error| {
        if e.kind() == std::io::ErrorKind::UnexpectedEof {
            bad(format!("{name}: the file ends before the elements its header declares (shape {shape:?})"))
        } else {
            bad(format!("{name}: {e}"))
        }
    };
    let npyz::DType::Plain(ty) = &dtype else {
        return Err(bad(format!("{name}: a structured array; AICF reads plain numeric arrays")));
    };
    let values: Vec<f64> = match (ty.type_char(), ty.size_field()) {
        (npyz::TypeChar::Float, 4) => npy.into_vec::<f32>().map_err(fail)?.into_iter().map(f64::from).collect(),
        (npyz::TypeChar::Float, 8) => npy.into_vec::<f64>().map_err(fail)?,
        (npyz::TypeChar::Int, 4) => npy.into_vec::<i32>().map_err(fail)?.into_iter().map(f64::from).collect(),
        (npyz::TypeChar::Int, 8) => npy.into_vec::<i64>().map_err(fail)?.into_iter().map(|v| v as f64).collect(),
        (npyz::TypeChar::Uint, 1) => npy.into_vec::<u8>().map_err(fail)?.into_iter().map(f64::from).collect(),
        // (16-bit images and audio, narrow ids and labels, half floats:
        // they were refused, where a safetensors file of them read.)
        (npyz::TypeChar::Float, 2) => {
            npy.into_vec::<npyz::half::f16>().map_err(fail)?.into_iter().map(f64::from).collect()
        }
        (npyz::TypeChar::Int, 1) => npy.into_vec::<i8>().map_err(fail)?.into_iter().map(f64::from).collect(),
        (npyz::TypeChar::Int, 2) => npy.into_vec::<i16>().map_err(fail)?.into_iter().map(f64::from).collect(),
        (npyz::TypeChar::Uint, 2) => npy.into_vec::<u16>().map_err(fail)?.into_iter().map(f64::from).collect(),
        (npyz::TypeChar::Uint, 4) => npy.into_vec::<u32>().map_err(fail)?.into_iter().map(f64::from).collect(),
        (npyz::TypeChar::Uint, 8) => npy.into_vec::<u64>().map_err(fail)?.into_iter().map(|v| v as f64).collect(),
        (npyz::TypeChar::Bool, 1) => {
            npy.into_vec::<bool>().map_err(fail)?.into_iter().map(|b| b as u8 as f64).collect()
        }
        _ => {
            return Err(bad(format!(
                "{name}: element type '{ty}' is not one AICF reads (float16, float32, float64, int8 to int64, \
                 uint8 to uint64, bool): convert it first, as x.astype(np.float32)"
            )));
        }
    };
    let values = if fortran { fortran_to_c(&values, &shape) } else { values };
    let bytes = matches!((ty.type_char(), ty.size_field()), (npyz::TypeChar::Uint, 1));
    let key = Path::new(&name).file_stem().map(|s| s.to_string_lossy().into_owned());
    Ok(Array { name, key, shape, values, bytes })
}

/// Refuses a `.npy` header whose shape's element count (or any product of
/// its dimensions: `npyz` also multiplies out the strides) overflows before
/// `npyz` multiplies it out (it would panic): the header is `\x93NUMPY`, two
/// version bytes, its length (2 bytes in version 1, 4 after), then a Python
/// dict literal, read here with the parser `npyz` uses (`py_literal`), so
/// that the `shape` checked is the one `npyz` takes (a tuple or a list, any
/// integer spelling, the last of duplicate keys). Anything else is left to
/// `npyz` to report.
fn npy_shape_fits(bytes: &[u8]) -> std::result::Result<(), String> {
    use py_literal::Value;
    if bytes.len() < 10 || &bytes[..6] != b"\x93NUMPY" {
        return Ok(());
    }
    let (len, start): (usize, usize) = match bytes[6] {
        1 => (u16::from_le_bytes([bytes[8], bytes[9]]) as usize, 10),
        _ if bytes.len() >= 12 => (u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]) as usize, 12),
        _ => return Ok(()),
    };
    let Some(header) = bytes.get(start..start.saturating_add(len)) else { return Ok(()) };
    let Ok(Value::Dict(entries)) = String::from_utf8_lossy(header).trim().parse::<Value>() else { return Ok(()) };
    let shape = entries.iter().rev().find_map(|(k, v)| match k {
        Value::String(k) if k == "shape" => Some(v),
        _ => None,
    });
    let dims = match shape {
        Some(Value::Tuple(d) | Value::List(d)) => d,
        _ => return Ok(()),
    };
    let mut count: u64 = 1;
    let mut text = Vec::new();
    for d in dims {
        let Value::Integer(d) = d else { return Ok(()) };
        text.push(d.to_string());
        // Negative: npyz's error. Zero: no elements, but the others' product
        // is still taken (strides).
        let Ok(d) = d.to_string().parse::<u64>() else {
            if d.to_string().starts_with('-') {
                return Ok(());
            }
            return Err(format!("its header's shape has a dimension of {d}, more than can be addressed"));
        };
        if d == 0 {
            continue;
        }
        count = count.checked_mul(d).filter(|&n| n.checked_mul(16).is_some()).ok_or_else(|| {
            format!("its header's shape ({}, ...) has more elements than can be addressed", text.join(", "))
        })?;
    }
    Ok(())
}

/// Values stored in Fortran order (the first index fastest) in C order
/// (the last index fastest), the same shape.
fn fortran_to_c(values: &[f64], shape: &[usize]) -> Vec<f64> {
    let mut out = Vec::with_capacity(values.len());
    let mut index = vec![0usize; shape.len()];
    for _ in 0..values.len() {
        // The Fortran offset of the C-order position `index`.
        let (mut offset, mut stride) = (0, 1);
        for (&i, &d) in index.iter().zip(shape) {
            offset += i * stride;
            stride *= d;
        }
        // (A header's shape and its data agree: npyz reads exactly that many.)
        out.push(values.get(offset).copied().unwrap_or(f64::NAN));
        for axis in (0..shape.len()).rev() {
            index[axis] += 1;
            if index[axis] < shape[axis] {
                break;
            }
            index[axis] = 0;
        }
    }
    out
}

/// `fixed`: the (training, held-out) examples where the data splits itself
/// (an image folder's `train/` and `val/`), else split as `options` says.
fn rows_of_arrays(
    name: &str,
    mut arrays: Vec<Array>,
    sig: &Signature,
    options: &DataOptions,
    fixed: Option<(Vec<usize>, Vec<usize>)>,
) -> Result<Dataset> {
    let fed = sig.fed();
    // Predictions from the data inputs alone: the targets, which feed
    // nothing, are 0 (they follow the data inputs).
    let data_inputs = fed.iter().filter(|i| i.role == Role::Data).count();
    if options.predicting && !arrays.is_empty() && arrays.len() == data_inputs {
        let rows = arrays[0].shape.first().copied().unwrap_or(0);
        for target in &fed[data_inputs..] {
            let shape: Vec<usize> = std::iter::once(rows).chain(target.shape.iter().skip(1).copied()).collect();
            let values = vec![0.0; shape.iter().product()];
            arrays.push(Array { name: format!("{name} (no target)"), key: None, shape, values, bytes: false });
        }
    }
    if arrays.len() != fed.len() {
        let list = |inputs: &[&Input]| inputs.iter().map(|i| i.describe()).collect::<Vec<_>>().join(", ");
        if options.predicting {
            return Err(bad(format!(
                "{name}: {} arrays for the model's {} data inputs ({}; the targets after them, which predictions do \
                 not read, may be left out)",
                arrays.len(),
                data_inputs,
                list(&fed[..data_inputs])
            )));
        }
        return Err(bad(format!(
            "{name}: {} arrays for the model's {} inputs ({})",
            arrays.len(),
            fed.len(),
            list(&fed)
        )));
    }
    let mut notes = Vec::new();
    // Arrays named as the model's inputs (`attention_mask.npy`, a
    // safetensors tensor `input_ids`: an imported model's names) feed those
    // inputs, in whatever order given; given otherwise, three arrays of one
    // shape fed each other's inputs without a word.
    let named: Vec<Option<usize>> = arrays
        .iter()
        .map(|a| a.key.as_ref().and_then(|k| fed.iter().position(|i| i.name.as_ref() == Some(k))))
        .collect();
    if named.iter().enumerate().any(|(k, j)| j.is_some_and(|j| j != k)) {
        let taken: Vec<usize> = named.iter().flatten().copied().collect();
        let slots: Vec<usize> = named.iter().enumerate().filter(|(_, j)| j.is_some()).map(|(k, _)| k).collect();
        let (mut sorted_taken, mut sorted_slots) = (taken.clone(), slots.clone());
        sorted_taken.sort_unstable();
        sorted_slots.sort_unstable();
        sorted_taken.dedup();
        if sorted_taken.len() != taken.len() {
            let twice = taken.iter().find(|j| taken.iter().filter(|k| k == j).count() > 1).copied().unwrap_or(0);
            let files: Vec<&str> =
                arrays.iter().zip(&named).filter(|(_, j)| **j == Some(twice)).map(|(a, _)| a.name.as_str()).collect();
            return Err(bad(format!(
                "{} are each named as the model's input '{}': give one array for each input",
                files.join(" and "),
                fed[twice].name.as_deref().unwrap_or("?")
            )));
        }
        if sorted_taken != sorted_slots {
            // (Two arrays of one name, or one named for a place an unnamed
            // array holds.)
            let (k, j) =
                named.iter().enumerate().find_map(|(k, j)| j.filter(|&j| j != k).map(|j| (k, j))).unwrap_or((0, 0));
            let order: Vec<String> = fed
                .iter()
                .enumerate()
                .map(|(i, input)| match (&input.name, input.role) {
                    (Some(n), _) => n.clone(),
                    (None, Role::Target) => "the target".to_string(),
                    (None, _) => format!("#{i}"),
                })
                .collect();
            return Err(bad(format!(
                "{} is named as the model's input '{}' (#{j}) and is given #{k}: give the arrays in the model's order \
                 ({}), or name each data array as its input (the target is given last)",
                arrays[k].name,
                fed[j].name.as_deref().unwrap_or("?"),
                order.join(", ")
            )));
        }
        let mut placed: Vec<Option<Array>> = arrays.into_iter().map(Some).collect();
        let mut ordered: Vec<Option<Array>> = (0..placed.len()).map(|_| None).collect();
        for (k, j) in named.iter().enumerate() {
            let at = j.unwrap_or(k);
            ordered[at] = placed[k].take();
        }
        arrays = ordered.into_iter().flatten().collect();
        let file = |a: &Array| {
            Path::new(&a.name).file_name().map_or_else(|| a.name.clone(), |f| f.to_string_lossy().into_owned())
        };
        notes.push(format!(
            "the arrays named as the model's inputs feed those inputs, not in the order given: {}",
            arrays
                .iter()
                .zip(fed.iter())
                .filter_map(|(a, i)| i.name.as_ref().map(|n| format!("{} -> {n}", file(a))))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    let rows = arrays[0].shape.first().copied().unwrap_or(0);
    if rows == 0 {
        return Err(bad(format!("{}: no examples (its first dimension is 0, or it has none)", arrays[0].name)));
    }
    // Every array one row per example: the first that differs is named
    // beside the first array (which set the count).
    if let Some(other) = arrays.iter().find(|a| a.shape.first().copied().unwrap_or(0) != rows) {
        return Err(bad(format!(
            "{} has {rows} examples (its first dimension) and {} has {}: each array holds one row per example",
            arrays[0].name,
            other.name,
            other.shape.first().copied().unwrap_or(0)
        )));
    }
    let scale = given_scale(name, options.feature_scale.unwrap_or(1.0))?;
    let array_names: Vec<String> = arrays.iter().map(|a| a.name.clone()).collect();
    let mut columns = Vec::new();
    for (i, (mut a, input)) in arrays.into_iter().zip(&fed).enumerate() {
        // (A rank-0 input has no examples' dimension to feed.)
        if input.shape.is_empty() {
            return Err(bad(format!(
                "{}: input #{i} of the model is a scalar ({}): data feeds inputs whose first dimension is the batch",
                a.name,
                input.describe()
            )));
        }
        let want = &input.shape[1..];
        // Axes of 1 aside, the same shape (labels saved as [N, 1] for a
        // model's [B] labels, as PyTorch code often keeps them, or targets
        // [N] for [B, 1]): the same values in the same order, read so.
        let ones = |dims: &[usize]| dims.iter().copied().filter(|&d| d != 1).collect::<Vec<_>>();
        if a.shape.first() == Some(&rows) && ones(&a.shape[1..]) == ones(want) {
            a.shape = std::iter::once(rows).chain(want.iter().copied()).collect();
        }
        if a.shape.first() != Some(&rows) || a.shape.get(1..) != Some(want) {
            // (A regression's targets fed to a classifier's labels: an ONNX
            // model imports with cross-entropy unless told --loss mse.)
            let one_hot = sig.classes().is_some_and(|c| a.shape[..] == [rows, c]);
            let shape = want.iter().map(usize::to_string).collect::<Vec<_>>().join(", ");
            let hint: std::borrow::Cow<str> = if input.role == Role::Target && options.predicting {
                "; it is the target, which predictions do not read: leave it out".into()
            } else if input.role == Role::Target && is_int(input.dtype) && sig.classifies() && one_hot {
                "; it is the target, class indices: give each row's class (argmax of a one-hot row)".into()
            } else if input.role == Role::Target && is_int(input.dtype) && sig.classifies() {
                "; it is the target, the class labels a cross-entropy takes: a regression's targets need a model \
                 whose loss is a squared error (an ONNX model: --loss mse)"
                    .into()
            } else if input.role == Role::Data
                && a.shape.len() == 4
                && want.len() == 3
                && a.shape[1..] == [want[1], want[2], want[0]]
            {
                // Images as PIL, TensorFlow and OpenCV keep them.
                "; its channels are last (NHWC): the model takes them first (NCHW), x.transpose(0, 3, 1, 2)".into()
            } else if input.role == Role::Data
                && a.shape.len() == 4
                && want.len() == 3
                && a.shape[1..] == [want[2], want[0], want[1]]
            {
                // PyTorch's images, for a model with `layout = nhwc` (a
                // reshape, said below, scrambled every image).
                "; its channels are first (NCHW): the model takes them last (NHWC), x.transpose(0, 2, 3, 1)".into()
            } else if input.role == Role::Data
                && a.shape.len() > 1
                && a.shape[1..].iter().product::<usize>() == want.iter().product::<usize>()
            {
                // (Not read so without a word: channels last are as many
                // values in another order.)
                format!(
                    "; the same number of values per example: if they are in the model's order, reshape it first, \
                     x.reshape(-1, {shape}) (a table's rows are read so)"
                )
                .into()
            } else {
                "".into()
            };
            return Err(bad(format!(
                "{}: input #{i} of the model is {} ({} examples of {:?}); the array is {:?}{hint}",
                a.name,
                input.describe(),
                rows,
                want,
                a.shape
            )));
        }
        let per = want.iter().product::<usize>().max(1);
        let place = |at: usize| {
            if per > 1 {
                format!("example {}, element {} (counting from 0)", at / per, at % per)
            } else {
                format!("example {} (counting from 0)", at)
            }
        };
        if let Some(at) = a.values.iter().position(|v| !v.is_finite()) {
            return Err(bad(format!("{}: {} is {}, not a finite number", a.name, place(at), a.values[at])));
        }
        // The model reads f32 (or narrower): a larger f64 would be infinite.
        if !is_int(input.dtype)
            && let Some(at) = a.values.iter().position(|v| v.abs() > f32::MAX as f64)
        {
            return Err(bad(format!(
                "{}: {} is {:e}, beyond the largest f32 ({:e})",
                a.name,
                place(at),
                a.values[at],
                f32::MAX
            )));
        }
        if is_int(input.dtype)
            && let Some(at) = a.values.iter().position(|v| v.fract() != 0.0)
        {
            return Err(bad(format!(
                "{}: input #{i} is {:?}, and {} is {}",
                a.name,
                input.dtype,
                place(at),
                a.values[at]
            )));
        }
        if input.role == Role::Target && !options.predicting {
            check_labels(&a.name, &a.values, sig, place)?;
        }
        // An integer the model's type cannot hold was saturated to its
        // limit without a word (ONNX's int64 inputs are imported as i32).
        let range = match input.dtype {
            DType::I32 => Some((i32::MIN as f64, i32::MAX as f64)),
            DType::I1 => Some((0.0, 1.0)),
            DType::U8 => Some((0.0, 255.0)),
            _ => None,
        };
        if let Some((lo, hi)) = range
            && let Some(at) = a.values.iter().position(|&v| v < lo || v > hi)
        {
            return Err(bad(format!(
                "{}: {} is {}, outside what input #{i} ({:?}) holds: [{lo}, {hi}]",
                a.name,
                place(at),
                a.values[at],
                input.dtype
            )));
        }
        // Token ids (a gather's indices): the kernel's check named only a
        // position in a shuffled batch, at the first step.
        if let Some(rows) = input.indexes
            && let Some(at) = a.values.iter().position(|&v| v < 0.0 || v >= rows as f64)
        {
            return Err(bad(format!(
                "{}: {} is {}: input #{i} indexes a table of {rows} rows (ids 0 to {}{})",
                a.name,
                place(at),
                a.values[at],
                rows - 1,
                if a.values[at] < 0.0 { "; ONNX's Gather would wrap it, PyTorch's embedding refuses it" } else { "" }
            )));
        }
        let mut values = a.values;
        // Arrays train as they are (scale 1); a checkpoint that trained on
        // a table's scaled features scores them by the same scale.
        let scaled = input.role == Role::Data && !is_int(input.dtype);
        // 8-bit images train as their 0 to 255, which a PyTorch user expects
        // as 0 to 1 (ToTensor's): said where a run starts on them (a model
        // without a norm took inputs 255 times too large unsaid).
        if scaled && a.bytes && options.starting && !options.standardize && values.iter().any(|&v| v > 1.0) {
            notes.push(format!(
                "{}: 8-bit values, read as they are (0 to 255); PyTorch's ToTensor divides images by 255: give x / \
                 255 as float32 (or --standardize) to train on 0 to 1",
                a.name
            ));
        }
        if scaled && scale != 1.0 {
            values.iter_mut().for_each(|v| *v /= scale);
        }
        columns.push(Column { shape: want.to_vec(), dtype: input.dtype, values, scaled });
    }
    // Targets given as the ids themselves (Hugging Face's labels) where
    // @loss takes the next tokens: the model would learn to repeat its
    // input.
    for &(t, d) in &sig.next_token_targets {
        let fed_index =
            |arg: usize| sig.inputs.iter().take(arg).filter(|i| matches!(i.role, Role::Data | Role::Target)).count();
        let (Some(tc), Some(dc)) = (columns.get(fed_index(t)), columns.get(fed_index(d))) else { continue };
        // (Equal where not masked with a negative label: a prompt's -100.)
        let unmasked = || tc.values.iter().zip(&dc.values).filter(|(t, _)| **t >= 0.0);
        if !options.predicting
            && tc.values.len() == dc.values.len()
            && unmasked().count() * 4 >= tc.values.len()
            && unmasked().all(|(t, d)| t == d)
        {
            return Err(bad(format!(
                "{}: the targets are the input ids of {} (Hugging Face's labels, which the model shifts itself): the \
                 imported @loss takes the next tokens, as a text's targets are (each row's ids from the second on, \
                 then the token after the window, or -100), and hands the model the ids",
                array_names.get(fed_index(t)).map_or("--data", String::as_str),
                array_names.get(fed_index(d)).map_or("the data", String::as_str)
            )));
        }
    }
    let (train, held) = fixed.unwrap_or_else(|| split_rows(rows, options));
    let mut metadata = BTreeMap::from([("feature_scale".into(), scale.to_string())]);
    let mut outlier = None;
    if options.standardize || options.feature_stats.is_some() {
        // One float data input is standardized (its statistics are one
        // checkpoint entry).
        let data: Vec<usize> = (0..columns.len()).filter(|&c| columns[c].scaled).collect();
        let [c] = data[..] else {
            return Err(bad(format!(
                "{name}: --standardize standardizes one float data input; the model has {}",
                data.len()
            )));
        };
        let per = columns[c].per().max(1);
        // The values as the files hold them are checked for an outlier
        // first (see `table`).
        let checked = Rows { columns, train: Vec::new(), held: Vec::new(), train_cap: None, held_cap: None };
        outlier = find_outlier(&array_names, &checked, scale);
        columns = checked.columns;
        if let Some(stats) = standardize(name, &mut columns[c].values, per, &train, options)? {
            metadata.insert(STANDARDIZE_KEY.into(), stats);
        }
        columns[c].scaled = false;
    }
    Ok(Dataset {
        description: format!(
            "{} of {} ({name})",
            count(rows, "example", "examples"),
            count(columns.len(), "array", "arrays")
        ),
        metadata,
        kind: Kind::Rows(Rows { columns, train, held, train_cap: None, held_cap: None }),
        outlier,
        notes,
        unscaled: false,
        row_names: None,
        augment: None,
    })
}

impl Dataset {
    /// What the proposer knows of this problem (`name`: the data's name):
    /// shapes, task, classes, rows, the labels' entropy, and a cheap
    /// probe's held-out loss (see [`crate::train::registry::Problem`]).
    pub fn problem(&self, name: &str, sig: &Signature) -> crate::train::registry::Problem {
        use crate::train::registry::Problem;
        match &self.kind {
            Kind::Text(t) => {
                let vocab = match &t.vocab {
                    Vocab::Chars(c) => c.len(),
                    Vocab::Bytes => 256,
                };
                let (train, held) = (&t.tokens[..t.split], &t.tokens[t.split..]);
                let mut unigram = vec![1f64; vocab];
                for &v in train {
                    unigram[v as usize] += 1.0;
                }
                let total: f64 = unigram.iter().sum();
                let entropy = (-unigram.iter().map(|c| c / total * (c / total).ln()).sum::<f64>()).max(0.0);
                // A bigram model (add-one) on the training text, scored on
                // the held-out text: what the previous character explains.
                // Counted sparsely: a dense vocabulary-squared table took
                // 37 GB for a text of 70,000 distinct characters.
                let mut bigram: std::collections::HashMap<(u32, u32), f64> = std::collections::HashMap::new();
                let mut rows = vec![vocab as f64; vocab];
                for w in train.windows(2) {
                    *bigram.entry((w[0] as u32, w[1] as u32)).or_insert(1.0) += 1.0;
                    rows[w[0] as usize] += 1.0;
                }
                let scored = held.windows(2).take(200_000);
                let (mut nll, mut n) = (0.0, 0usize);
                for w in scored {
                    let count = bigram.get(&(w[0] as u32, w[1] as u32)).copied().unwrap_or(1.0);
                    nll -= (count / rows[w[0] as usize]).ln();
                    n += 1;
                }
                Problem {
                    name: name.into(),
                    task: "text".into(),
                    input: vec![t.context],
                    outputs: vocab,
                    rows: train.len(),
                    label_entropy: entropy,
                    baseline_loss: entropy,
                    probe_loss: if n > 0 { nll / n as f64 } else { entropy },
                    data_hash: None,
                }
            }
            Kind::Rows(r) => {
                let (x, y) = (&r.columns[0], &r.columns[r.columns.len() - 1]);
                let per: usize = x.shape.iter().product::<usize>().max(1);
                let feature = |e: usize| &x.values[e * per..(e + 1) * per];
                let classes = sig.classifies().then(|| sig.classes()).flatten();
                // At most 2000 examples each, fewer where a row's work (its
                // features times the classes) is large: the probe is to be
                // cheap (about a second), whatever the shape of the data.
                let most = probe_examples(per, classes.unwrap_or(1));
                // An example's targets: one (a table's label), or several (a
                // sequence's, an imported language model's [N, T] arrays):
                // the statistics are over every target that counts, and the
                // linear probe, one label an example, is of the first kind
                // alone (a sequence's is the baseline: it learns nothing).
                let width: usize = y.shape.iter().product::<usize>().max(1);
                let targets_of = |e: usize| &y.values[e * width..(e + 1) * width];
                // Examples labelled with the loss's ignore_index count for
                // nothing (a classifier's only).
                let counts_in = |e: &usize| classes.is_none() || width > 1 || sig.counts_label(y.values[*e]);
                let train: Vec<usize> = r.train.iter().copied().filter(counts_in).take(most).collect();
                let held: Vec<usize> = if r.held.is_empty() {
                    train.clone()
                } else {
                    r.held.iter().copied().filter(counts_in).take(most).collect()
                };
                match classes {
                    Some(c) => {
                        let mut counts = vec![0f64; c];
                        for e in r.train.iter().filter(|e| counts_in(e)) {
                            for &t in targets_of(*e).iter().filter(|&&t| sig.counts_label(t) && t >= 0.0) {
                                counts[(t as usize).min(c - 1)] += 1.0;
                            }
                        }
                        let total: f64 = counts.iter().sum::<f64>().max(1.0);
                        // max(0): one class gives -0, printed "-0.000".
                        let entropy =
                            (-counts.iter().filter(|&&n| n > 0.0).map(|n| n / total * (n / total).ln()).sum::<f64>())
                                .max(0.0);
                        let probe = if width == 1 {
                            softmax_probe(&train, &held, feature, |e| y.values[e] as usize, per, c)
                        } else {
                            entropy
                        };
                        Problem {
                            name: name.into(),
                            task: "classification".into(),
                            input: x.shape.clone(),
                            outputs: c,
                            rows: r.train.len(),
                            label_entropy: entropy,
                            baseline_loss: entropy,
                            probe_loss: probe,
                            data_hash: None,
                        }
                    }
                    None => {
                        let targets: Vec<f64> = r.train.iter().flat_map(|&e| targets_of(e).iter().copied()).collect();
                        let mean = targets.iter().sum::<f64>() / targets.len().max(1) as f64;
                        let var = targets.iter().map(|t| (t - mean).powi(2)).sum::<f64>() / targets.len().max(1) as f64;
                        let probe = if width == 1 {
                            least_squares_probe(&train, &held, feature, |e| y.values[e], per)
                        } else {
                            var
                        };
                        Problem {
                            name: name.into(),
                            task: "regression".into(),
                            input: x.shape.clone(),
                            outputs: 1,
                            rows: r.train.len(),
                            label_entropy: 0.5 * var.max(1e-300).ln(),
                            baseline_loss: var,
                            probe_loss: probe,
                            data_hash: None,
                        }
                    }
                }
            }
        }
    }
}

/// The multiply-adds a probe's step may take over its examples (see
/// [`softmax_probe`]): 100 steps of it take about a second.
const PROBE_WORK: usize = 20_000_000;

/// How many training (and held-out) examples a probe of `features`
/// inputs and `classes` outputs takes: 2000, fewer where a step over them
/// would exceed [`PROBE_WORK`], and at least 16.
fn probe_examples(features: usize, classes: usize) -> usize {
    let per_row = features.saturating_add(1).saturating_mul(classes.max(1));
    (PROBE_WORK / per_row).clamp(16, 2000)
}

/// Softmax regression (full-batch gradient descent, 100 steps, fewer where
/// even 16 examples' steps would exceed [`PROBE_WORK`]) trained on `train`,
/// its mean cross-entropy on `held`.
fn softmax_probe<'a>(
    train: &[usize],
    held: &[usize],
    feature: impl Fn(usize) -> &'a [f64],
    label: impl Fn(usize) -> usize,
    d: usize,
    c: usize,
) -> f64 {
    let mut w = vec![0f64; (d + 1) * c];
    let logits = |w: &[f64], x: &[f64], out: &mut [f64]| {
        for k in 0..c {
            let row = &w[k * (d + 1)..(k + 1) * (d + 1)];
            out[k] = row[d] + row[..d].iter().zip(x).map(|(a, b)| a * b).sum::<f64>();
        }
        let max = out.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let sum: f64 = out.iter().map(|v| (v - max).exp()).sum();
        for v in out.iter_mut() {
            *v = (*v - max).exp() / sum;
        }
    };
    let mut p = vec![0f64; c];
    let lr = 1.0;
    let work = train.len().max(1).saturating_mul(d + 1).saturating_mul(c);
    let steps = (100 * PROBE_WORK / work.max(1)).clamp(1, 100);
    for _ in 0..steps {
        let mut grad = vec![0f64; w.len()];
        for &e in train {
            let x = feature(e);
            logits(&w, x, &mut p);
            let y = label(e).min(c - 1);
            for k in 0..c {
                let g = p[k] - (k == y) as u8 as f64;
                let row = &mut grad[k * (d + 1)..(k + 1) * (d + 1)];
                for (gi, xi) in row[..d].iter_mut().zip(x) {
                    *gi += g * xi;
                }
                row[d] += g;
            }
        }
        let n = train.len().max(1) as f64;
        for (wi, gi) in w.iter_mut().zip(&grad) {
            *wi -= lr * gi / n;
        }
    }
    let mut nll = 0.0;
    for &e in held {
        logits(&w, feature(e), &mut p);
        nll -= p[label(e).min(c - 1)].max(1e-12).ln();
    }
    nll / held.len().max(1) as f64
}

/// Least squares (ridge 1e-6, with a bias) fitted on `train`, its mean
/// squared error on `held`.
fn least_squares_probe<'a>(
    train: &[usize],
    held: &[usize],
    feature: impl Fn(usize) -> &'a [f64],
    target: impl Fn(usize) -> f64,
    d: usize,
) -> f64 {
    let n = d + 1;
    let mut a = vec![0f64; n * n];
    let mut b = vec![0f64; n];
    for &e in train {
        let x = feature(e);
        let xb = |i: usize| if i < d { x[i] } else { 1.0 };
        for i in 0..n {
            b[i] += xb(i) * target(e);
            for j in 0..n {
                a[i * n + j] += xb(i) * xb(j);
            }
        }
    }
    for i in 0..n {
        a[i * n + i] += 1e-6 * train.len() as f64;
    }
    // Gaussian elimination with partial pivoting.
    for col in 0..n {
        let pivot = (col..n).max_by(|&i, &j| a[i * n + col].abs().total_cmp(&a[j * n + col].abs())).unwrap_or(col);
        if a[pivot * n + col].abs() < 1e-300 {
            continue;
        }
        for k in 0..n {
            a.swap(col * n + k, pivot * n + k);
        }
        b.swap(col, pivot);
        for row in col + 1..n {
            let f = a[row * n + col] / a[col * n + col];
            for k in col..n {
                a[row * n + k] -= f * a[col * n + k];
            }
            b[row] -= f * b[col];
        }
    }
    let mut w = vec![0f64; n];
    for i in (0..n).rev() {
        let s: f64 = (i + 1..n).map(|k| a[i * n + k] * w[k]).sum();
        w[i] = if a[i * n + i].abs() < 1e-300 { 0.0 } else { (b[i] - s) / a[i * n + i] };
    }
    let mut se = 0.0;
    for &e in held {
        let x = feature(e);
        let pred = w[d] + (0..d).map(|i| w[i] * x[i]).sum::<f64>();
        se += (pred - target(e)).powi(2);
    }
    se / held.len().max(1) as f64
}

#[cfg(test)]
mod tests {
    use super::{
        Column, DType, PROBE_WORK, Rows, find_outlier, fortran_to_c, npy_shape_fits, probe_examples, softmax_probe,
    };

    /// A `.npy` header of `shape` (version 1).
    fn npy_header(shape: &str) -> Vec<u8> {
        let dict = format!("{{'descr': '<f4', 'fortran_order': False, 'shape': {shape}, }}");
        let mut out = b"\x93NUMPY\x01\x00".to_vec();
        out.extend_from_slice(&(dict.len() as u16).to_le_bytes());
        out.extend_from_slice(dict.as_bytes());
        out
    }

    /// A header whose element count overflows is refused before `npyz`
    /// multiplies it out (it panicked); an ordinary one passes.
    #[test]
    fn a_npy_shape_past_what_can_be_addressed_is_refused() {
        let e = npy_shape_fits(&npy_header("(4611686018427387904, 1024)")).unwrap_err();
        assert!(e.contains("has more elements than can be addressed"), "{e}");
        // Every spelling npyz's parser reads: a list, hex, underscores, a
        // zero beside an overflowing product (the strides), a dimension
        // past u64, the last of two 'shape' keys.
        for shape in [
            "[4611686018427387904, 1024]",
            "(0x4000000000000000, 1024)",
            "(4_611_686_018_427_387_904, 1024)",
            "(0, 8589934592, 8589934592)",
            "(100000000000000000000000,)",
        ] {
            assert!(npy_shape_fits(&npy_header(shape)).is_err(), "{shape}");
        }
        let twice = npy_header("(3,), 'shape': (4611686018427387904, 1024)");
        assert!(npy_shape_fits(&twice).is_err());
        assert!(npy_shape_fits(&npy_header("(1099511627776, 64)")).is_ok());
        assert!(npy_shape_fits(&npy_header("(3,)")).is_ok());
        assert!(npy_shape_fits(&npy_header("()")).is_ok());
        assert!(npy_shape_fits(b"not a npy").is_ok());
    }

    fn rows(features: Vec<f64>, per: usize, targets: Vec<f64>, target_type: DType) -> Rows {
        let n = targets.len();
        Rows {
            columns: vec![
                Column { shape: vec![per], dtype: DType::F32, values: features, scaled: true },
                Column { shape: vec![], dtype: target_type, values: targets, scaled: false },
            ],
            train: (0..n).collect(),
            held: vec![],
            train_cap: None,
            held_cap: None,
        }
    }

    /// A value a million times beyond the rest is named where it is, as the
    /// file holds it (before a table's scaling), in the file of its input;
    /// sparse data (mostly zeros) and heavy but plausible tails are not.
    #[test]
    /// Whole batches for a model whose batch is fixed: a table's epoch takes
    /// the first rows of its shuffled order (other rows each epoch), and its
    /// held-out rows are cut to whole batches.
    fn whole_batches_leave_out_other_rows_each_epoch() {
        let mut r = rows(vec![0.0; 10 * 2], 2, vec![0.0; 10], DType::I32);
        r.held = r.train.split_off(7); // 7 training rows, 3 held out
        let mut d = super::Dataset {
            kind: super::Kind::Rows(r),
            description: String::new(),
            metadata: std::collections::BTreeMap::new(),
            outlier: None,
            notes: Vec::new(),
            unscaled: false,
            row_names: None,
            augment: None,
        };
        assert_eq!(d.whole_batches(2, 2), (1, 1));
        assert_eq!((d.train_len(), d.held_len(), d.loaded_len()), (6, 2, 10));
        assert_eq!(d.held_out(2), vec![vec![0, 1]]);
        let mut rng = 5;
        let orders: Vec<Vec<usize>> = (0..8).map(|_| d.epoch_order(&mut rng)).collect();
        assert!(orders.iter().all(|o| o.len() == 6));
        let left_out: std::collections::BTreeSet<usize> =
            orders.iter().map(|o| (0..7).find(|i| !o.contains(i)).unwrap()).collect();
        assert!(left_out.len() > 1, "the same row left out every epoch: {left_out:?}");
    }

    #[test]
    fn outliers_are_named_where_they_are() {
        let names = ["x.npy".to_string(), "y.npy".to_string()];
        let mut features: Vec<f64> = (0..400).map(|i| (i % 17) as f64 / 16.0).collect();
        assert_eq!(find_outlier(&names, &rows(features.clone(), 4, vec![0.0; 100], DType::I32), 16.0), None);
        features[4 * 37 + 2] = 1e30 / 16.0;
        let found = find_outlier(&names, &rows(features.clone(), 4, vec![0.0; 100], DType::I32), 16.0).unwrap();
        assert!(found.starts_with("x.npy: element 2 of example 37 (counting from 0) of input #0 is 1e30, "), "{found}");
        // A float target's outlier names the target's file; of two, the
        // farther one is named.
        let mut targets = vec![0.5; 100];
        targets[9] = -4e12;
        let found = find_outlier(&names, &rows(features, 4, targets.clone(), DType::F32), 1.0).unwrap();
        assert!(found.starts_with("x.npy: element 2 of example 37"), "the farther one first: {found}");
        let plain: Vec<f64> = (0..400).map(|i| (i % 17) as f64).collect();
        let found = find_outlier(&names, &rows(plain, 4, targets, DType::F32), 1.0).unwrap();
        assert!(found.starts_with("y.npy: example 9 (counting from 0) of input #1 is -4e12"), "{found}");
        // Mostly zeros, and a tail 1000x the percentile: no outlier.
        let mut sparse = vec![0.0; 400];
        sparse[5] = 1.0;
        sparse[300] = 1000.0;
        assert_eq!(find_outlier(&names, &rows(sparse, 4, vec![0.0; 100], DType::I32), 1.0), None);
    }

    /// A text's byte-order mark is no character of its vocabulary.
    #[test]
    fn a_byte_order_mark_is_not_text() {
        let path = std::env::temp_dir().join(format!("aicf-bom-{}.txt", std::process::id()));
        std::fs::write(&path, [&[0xef, 0xbb, 0xbf][..], "abc".repeat(100).as_bytes()].concat()).unwrap();
        let peeked = super::peek(&path, None);
        let _ = std::fs::remove_file(&path);
        let peeked = peeked.unwrap();
        assert_eq!((peeked.outputs, peeked.rows), (3, 300));
    }

    /// numpy's `np.asfortranarray(np.arange(24).reshape(2, 3, 4))` stores
    /// the element at (i, j, k) at offset i + 2 j + 6 k; read back in C
    /// order it is `arange(24)` again.
    #[test]
    fn fortran_ordered_arrays_read_in_c_order() {
        let shape = [2, 3, 4];
        let mut stored = vec![0.0; 24];
        for i in 0..2 {
            for j in 0..3 {
                for k in 0..4 {
                    stored[i + 2 * j + 6 * k] = (i * 12 + j * 4 + k) as f64;
                }
            }
        }
        let c: Vec<f64> = (0..24).map(|v| v as f64).collect();
        assert_eq!(fortran_to_c(&stored, &shape), c);
        assert_eq!(fortran_to_c(&[1.0, 2.0], &[2]), [1.0, 2.0]);
        assert_eq!(fortran_to_c(&[5.0], &[]), [5.0]);
    }

    /// The probe of a problem's descriptor stays within its budget however
    /// many classes there are (5000 classes took over a minute), and small
    /// problems keep every one of their 2000 examples and 100 steps.
    #[test]
    fn the_probe_s_work_is_bounded_by_its_budget() {
        assert_eq!(probe_examples(64, 10), 2000);
        let (d, c) = (64, 5000);
        let n = probe_examples(d, c);
        assert!((16..2000).contains(&n) && n * (d + 1) * c <= PROBE_WORK, "{n} examples");
        let x = vec![0.5; d];
        let calls = std::cell::Cell::new(0usize);
        let train: Vec<usize> = (0..n).collect();
        let feature = |_| {
            calls.set(calls.get() + 1);
            &x[..]
        };
        let loss = softmax_probe(&train, &train[..1], feature, |e| e % c, d, c);
        assert!(loss.is_finite());
        // Each call is one example's step: within 100 steps' budget.
        assert!(calls.get() > n && calls.get() * (d + 1) * c <= 100 * PROBE_WORK + (d + 1) * c, "{}", calls.get());
        // The digits' shape: every example, every step.
        calls.set(0);
        let train: Vec<usize> = (0..2000).collect();
        softmax_probe(&train, &train[..1], feature, |e| e % 10, d, 10);
        assert_eq!(calls.get(), 100 * 2000 + 1);
    }
}
