//! Every pass pipeline AICF runs on a model, spelled in one place, and the
//! whole compilation of a model (parse, passes, kernels) as timed stages.
//!
//! ```text
//!  source --parse + verify--> hl --[hl-set-batch]--> --aicf-train-pipeline--> planned ll
//!         --codegen (target)--> artifact: manifest.json + kernels.so | PTX modules per chip
//! ```

pub use crate::codegen::Target;

use crate::codegen;
use crate::timing::Timings;
use crate::{CompileError, CompilerContext, Result, run_pipeline};
use aicf_runtime::artifact::{Manifest, ir_hash};
use std::path::Path;

/// How a model's train step is compiled: the optimizer it gets and the
/// memory plan's budget.
#[derive(Clone, Debug, PartialEq)]
pub struct TrainOptions {
    /// `sgd`, `adam` or `adamw`.
    pub optimizer: String,
    pub momentum: f64,
    /// SGD's Nesterov momentum (PyTorch's `nesterov=True`).
    pub nesterov: bool,
    pub weight_decay: f64,
    /// Adam's and AdamW's (beta1, beta2); PyTorch's (0.9, 0.999) by default.
    pub betas: (f64, f64),
    /// Adam's and AdamW's denominator term; PyTorch's 1e-8 by default.
    pub eps: f64,
    /// Parameters of fewer dimensions take no weight decay: 0, every one
    /// does (PyTorch's default); 2, biases and norm weights do not
    /// (nanoGPT's and Hugging Face's parameter groups).
    pub decay_min_rank: usize,
    /// Clip all gradients together to this global L2 norm before the
    /// update (PyTorch's `clip_grad_norm_`); `None`: no clipping.
    pub clip_norm: Option<f64>,
    /// Arena budget of every function's memory plan, met by recomputing
    /// activations (`ll-plan-memory{budget}`); `None`: no budget.
    pub memory_budget: Option<MemoryBudget>,
    /// Mixed precision (`hl-autocast` before autodiff), fp32 by default.
    pub precision: Precision,
    /// Pad large 16-bit contractions whose dimensions are not multiples of
    /// 8 (`hl-pad-contractions`, Inductor's `pad_mm`), so tensor-core GEMMs
    /// read and write aligned rows: after autocast, or in a model written
    /// in 16 bits at fp32 (f32 contractions are never padded). On by
    /// default.
    pub shape_padding: bool,
    /// A data-parallel train step: the loss and gradients, weighted by the
    /// replica's share of the batch (its `replica_weight` input), summed
    /// over the replicas before the update, in buckets of at least
    /// `bucket_bytes` (`hl-optimizer{data-parallel}`,
    /// `ll-bucket-collectives`). Run by one process alone, it trains as
    /// the step without.
    pub data_parallel: bool,
    pub bucket_bytes: u64,
    /// Also `@train_grad` and `@train_apply`, the step split where its
    /// gradients are summed, for gradient accumulation over micro-batches
    /// (`hl-optimizer{accumulate}`).
    pub accumulate: bool,
    /// Attention's gradient as one `hl.attention_backward` (the
    /// probabilities recomputed, never materialised) where its heads take
    /// the GPU's tensor-core kernels (f16/bf16, head sizes multiples of 16
    /// up to 128), or every attention's with
    /// [`TrainOptions::fused_attention_any_heads`], rather than GEMMs over
    /// the materialised probabilities. Off by default here; `aicf train`
    /// and the [`crate::train::Trainer`] turn it on for either device
    /// (`--attention-backward`).
    pub fused_attention_backward: bool,
    /// With `fused_attention_backward`, every attention's gradient fused,
    /// whatever its heads: the CPU's blocked kernel takes them all (and
    /// beats the GEMMs), where the GPU's f32 heads run faster as GEMMs.
    pub fused_attention_any_heads: bool,
    /// Ungrouped convolutions and their gradients as matrix products over
    /// the image's window rows (`convert-hl-to-ll{conv-as-gemm}`: im2col,
    /// the GEMM the runtime chooses, col2im), else one direct kernel each.
    /// On by default; `aicf train` and the [`crate::train::Trainer`] turn it
    /// off for a GPU, where it is not yet measured (`--conv`).
    pub conv_as_gemm: bool,
}

/// PyTorch DDP's default gradient bucket: 25 MiB.
pub const DEFAULT_BUCKET_BYTES: u64 = 25 << 20;

impl Default for TrainOptions {
    fn default() -> Self {
        TrainOptions {
            optimizer: "adam".into(),
            momentum: 0.0,
            nesterov: false,
            weight_decay: 0.0,
            betas: (0.9, 0.999),
            eps: 1e-8,
            decay_min_rank: 0,
            clip_norm: None,
            memory_budget: None,
            precision: Precision::Fp32,
            shape_padding: true,
            data_parallel: false,
            bucket_bytes: DEFAULT_BUCKET_BYTES,
            accumulate: false,
            fused_attention_backward: false,
            fused_attention_any_heads: false,
            conv_as_gemm: true,
        }
    }
}

/// The precision a model trains in: f32 throughout, or contractions in
/// bf16/f16 with f32 accumulation, master weights and accuracy guards
/// (`hl-autocast`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Precision {
    #[default]
    Fp32,
    Bf16,
    Fp16,
}

impl Precision {
    /// `fp32`, `bf16` or `fp16` (also `f32`, `f16`), in any case.
    pub fn parse(text: &str) -> std::result::Result<Precision, String> {
        match text.trim().to_ascii_lowercase().as_str() {
            "fp32" | "f32" => Ok(Precision::Fp32),
            "bf16" => Ok(Precision::Bf16),
            "fp16" | "f16" => Ok(Precision::Fp16),
            _ => Err(format!("'{}': a precision is fp32, bf16 or fp16 (f32 and f16 read as well)", text.trim())),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Precision::Fp32 => "fp32",
            Precision::Bf16 => "bf16",
            Precision::Fp16 => "fp16",
        }
    }

    /// The `hl-autocast` pass that sets it up (none for fp32), and
    /// `hl-pad-contractions` after it where `pad`, with a trailing comma.
    fn autocast(self, pad: bool) -> String {
        let pad = if pad { "hl-pad-contractions," } else { "" };
        match self {
            // (A model written in bf16 pads at fp32 too.)
            Precision::Fp32 => pad.to_string(),
            Precision::Bf16 => format!("hl-autocast{{dtype=bf16}},{pad}"),
            Precision::Fp16 => format!("hl-autocast{{dtype=f16}},{pad}"),
        }
    }
}

/// An arena budget: bytes, or a fraction of each function's arena
/// without one.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum MemoryBudget {
    Bytes(u64),
    Fraction(f64),
}

impl MemoryBudget {
    /// As `--memory-budget` takes it: bytes, or a percentage.
    pub fn text(&self) -> String {
        match self {
            MemoryBudget::Bytes(b) => b.to_string(),
            MemoryBudget::Fraction(f) => format!("{}%", f * 100.0),
        }
    }

    /// `12000000`, `512K`, `64M`, `2G` (KiB, MiB, GiB) or `60%`.
    pub fn parse(text: &str) -> std::result::Result<MemoryBudget, String> {
        let t = text.trim();
        if let Some(p) = t.strip_suffix('%') {
            let p: f64 = p.trim().parse().map_err(|_| format!("'{text}': not a percentage"))?;
            if !(p > 0.0 && p <= 100.0) {
                return Err(format!("'{text}': a percentage in (0, 100]"));
            }
            return Ok(MemoryBudget::Fraction(p / 100.0));
        }
        let (digits, unit) = match t.char_indices().find(|(_, c)| !c.is_ascii_digit()) {
            Some((i, _)) => t.split_at(i),
            None => (t, ""),
        };
        const FORM: &str = "a whole number of bytes, with K, M or G (1024-based), or a percentage such as 60%";
        if digits.is_empty() {
            return Err(format!("'{text}': not a number of bytes ({FORM})"));
        }
        let scale: u64 = match unit.trim() {
            "" | "B" => 1,
            "K" | "k" | "KiB" => 1 << 10,
            "M" | "m" | "MiB" => 1 << 20,
            "G" | "g" | "GiB" => 1 << 30,
            other => return Err(format!("'{text}': unknown unit '{other}' ({FORM})")),
        };
        let n: u64 = digits.parse().map_err(|_| format!("'{text}': not a number of bytes"))?;
        match n.checked_mul(scale) {
            Some(0) => Err(format!("'{text}': a budget of 0 bytes")),
            Some(b) if b <= i64::MAX as u64 => Ok(MemoryBudget::Bytes(b)),
            _ => Err(format!("'{text}': more bytes than a budget can hold")),
        }
    }
}

impl TrainOptions {
    /// ` fused-attention-backward=true` where it is on, and
    /// ` fused-attention-any-heads=true` (options of `hl-optimizer` and
    /// `aicf-train-pipeline`).
    fn attention_option(&self) -> &'static str {
        match (self.fused_attention_backward, self.fused_attention_any_heads) {
            (false, _) => "",
            (true, false) => " fused-attention-backward=true",
            (true, true) => " fused-attention-backward=true fused-attention-any-heads=true",
        }
    }

    /// The pass pipeline from a model to its planned, scheduled train step.
    pub fn train_pipeline(&self) -> String {
        let budget = match self.memory_budget {
            Some(MemoryBudget::Bytes(b)) => format!(" budget={b}"),
            Some(MemoryBudget::Fraction(f)) => format!(" budget-fraction={f}"),
            None => String::new(),
        };
        let padding = if self.shape_padding { "" } else { " shape-padding=false" };
        let mut parallel = if self.data_parallel {
            format!(" data-parallel=true bucket-bytes={}", self.bucket_bytes)
        } else {
            String::new()
        };
        if self.accumulate {
            parallel.push_str(" accumulate=true");
        }
        parallel.push_str(self.attention_option());
        if !self.conv_as_gemm {
            parallel.push_str(" conv-as-gemm=false");
        }
        format!(
            "builtin.module(aicf-train-pipeline{{optimizer={} weight-decay={} momentum={}{}{budget} precision={}{padding}{parallel}}})",
            self.optimizer,
            self.weight_decay,
            self.momentum,
            self.update_options(),
            self.precision.name()
        )
    }

    /// The `hl` part of the train pipeline: the fused train step before
    /// it is lowered to `ll` (`aicf compile --emit fused`).
    pub fn fusion_pipeline(&self) -> String {
        format!(
            "builtin.module(hl-fuse-attention,{}hl-optimizer{{kind={} weight-decay={} momentum={}{}{}{}{}{}}},canonicalize,cse,hl-fuse-gemm-epilogue,\
             canonicalize,hl-fuse-reductions,hl-fuse-elementwise,hl-fuse-optimizer,canonicalize,cse)",
            self.precision.autocast(self.shape_padding),
            self.optimizer,
            self.weight_decay,
            self.momentum,
            self.update_options(),
            if self.precision == Precision::Fp16 { " loss-scale=65536" } else { "" },
            if self.data_parallel { " data-parallel=true" } else { "" },
            if self.accumulate { " accumulate=true" } else { "" },
            self.attention_option(),
        )
    }

    /// The betas and the clipping norm as options of `hl-optimizer` (and
    /// `aicf-train-pipeline`), with a leading space; nothing where they
    /// are the defaults, so the default pipeline's text stays as it was.
    fn update_options(&self) -> String {
        let mut text = String::new();
        if self.nesterov {
            text.push_str(" nesterov=true");
        }
        if self.betas != (0.9, 0.999) {
            text.push_str(&format!(" beta1={} beta2={}", self.betas.0, self.betas.1));
        }
        if self.eps != 1e-8 {
            text.push_str(&format!(" eps={:e}", self.eps));
        }
        if self.decay_min_rank != 0 {
            text.push_str(&format!(" decay-min-rank={}", self.decay_min_rank));
        }
        if let Some(c) = self.clip_norm {
            text.push_str(&format!(" clip-norm={c}"));
        }
        text
    }
}

/// Before a GPU kernels module is lowered: `tanh` is rewritten through
/// `exp` (sign(x) (1 - e^-2|x|) / (1 + e^-2|x|), within 1e-7 absolute).
/// (Then every `exp` is guarded: `codegen::guard_exp`.)
pub(crate) const KERNEL_MATH: &str = "builtin.module(math-expand-ops{ops=tanh})";

/// Before a CPU kernels module is lowered: every f32 `tanh` and `erf`
/// becomes MLIR's inline rational approximation (`aicf-approximate-math`;
/// tanh clamped to +-7.99, odd degree-13 over even degree-6 polynomials;
/// erf piecewise over three intervals), which vectorises with the loop
/// around it. Through `exp` (the GPU's form) each eight lanes of tanh took
/// a call to libmvec's `exp`, with the registers spilled around it, and a
/// division; `erf` has no vector routine in libmvec and stayed a scalar
/// libm call per element. On 2 threads of an AVX2-only Zen 3 the
/// transformer block's tanh GELU took 0.97 ms forward and 1.09 backward
/// (now 0.65 and 0.69), and the char LM's exact (erf) GELU (4 blocks,
/// 524k elements) 2.3 and 4.1 ms (its elementwise kernels 27.8 -> 6.3 ms a
/// step). f64 stays libm's.
pub(crate) const KERNELS_APPROXIMATE_INLINE: &str = "builtin.module(aicf-approximate-math{ops=math.tanh,math.erf})";

/// Before a CPU kernels module is lowered: arithmetic and math on 16-bit
/// floats (in elementwise bodies) runs in f32, rounded after each op. Then
/// every rounding to bf16 becomes integer code
/// (`codegen::round_bf16_in_integers`).
pub(crate) const KERNELS_16BIT: &str = "builtin.module(math-extend-to-supported-types{target-type=f32},\
arith-emulate-unsupported-floats{source-types=bf16,f16 target-type=f32})";

/// Before a CPU kernels module is lowered, where the kernels use AVX-512:
/// every f32 `exp` becomes MLIR's inline polynomial
/// (`aicf-approximate-math`), which vectorises with the loop around it,
/// instead of a call to the vector library.
pub(crate) const KERNELS_APPROXIMATE: &str = "builtin.module(aicf-approximate-math{ops=math.exp})";

/// The CPU kernels module to the LLVM dialect (bare-pointer calling
/// convention, so each kernel takes plain pointers); widening bf16 is
/// integer code too (`arith-expand`): the host need not have `avx512_bf16`,
/// and no libgcc conversion routine is called.
pub(crate) const KERNELS_TO_LLVM: &str = "builtin.module(inline,symbol-dce,canonicalize,cse,convert-scf-to-cf,\
arith-expand{include-bf16=true},convert-math-to-llvm,convert-math-to-libm,convert-vector-to-llvm,finalize-memref-to-llvm,convert-arith-to-llvm,\
convert-index-to-llvm,convert-cf-to-llvm,convert-func-to-llvm{use-bare-ptr-memref-call-conv=1},\
reconcile-unrealized-casts)";

/// The GPU kernels module (a `gpu.module`) to PTX for `chip` (`sm_80`,
/// `sm_90a`), linking libdevice for `math`.
pub(crate) fn gpu_kernels_to_ptx(chip: &str, libdevice: &Path) -> String {
    format!(
        "builtin.module(gpu.module(inline,symbol-dce,canonicalize,cse),\
         nvvm-attach-target{{chip={chip} features=+ptx80 O=3 l={}}},\
         gpu.module(convert-nvgpu-to-nvvm,convert-scf-to-cf,convert-gpu-to-nvvm{{use-bare-ptr-memref-call-conv=1}},\
         convert-nvvm-to-llvm,convert-vector-to-llvm,convert-ub-to-llvm,reconcile-unrealized-casts),\
         gpu-module-to-binary{{format=isa}})",
        libdevice.display()
    )
}

/// Widens linear layer `layer` to `width` units (a growth rewrite), the
/// new units masked in over `mask` steps (0: not).
pub fn widen(layer: &str, width: usize, mask: usize, mask_delay: usize) -> String {
    format!("builtin.module(hl-widen{{layer={layer} width={width} mask={mask} mask_delay={mask_delay}}})")
}

/// Inserts a layer named `name` after `after`'s activation (a growth rewrite).
pub fn deepen(after: &str, name: &str, residual: bool) -> String {
    format!("builtin.module(hl-deepen{{after={after} name={name} residual={residual}}})")
}

/// Widens the residual stream to `width` channels (a growth rewrite).
pub fn widen_residual(width: usize, rule: crate::passes::grow_stream::ResidualRule) -> String {
    format!("builtin.module(hl-widen-residual{{width={width} rule={}}})", rule.name())
}

/// Inserts a block at `at` of the stack `prefix`, built like block `from`
/// (a growth rewrite), its branches masked in over `mask` steps (0: not).
pub fn insert_block(prefix: &str, at: i64, from: i64, mask: usize, mask_delay: usize) -> String {
    format!(
        "builtin.module(hl-insert-block{{prefix={prefix} at={at} from={from} mask={mask} mask_delay={mask_delay}}})"
    )
}

/// Grows multi-head attention `attention` to `heads` heads (a growth rewrite).
pub fn add_heads(attention: &str, heads: usize, mask: usize, mask_delay: usize) -> String {
    // Attention written out as ops (an imported model's) is fused first:
    // the head count then changes in the projections and the head split
    // and merge only (a mask broadcast to the heads states its count).
    format!(
        "builtin.module(hl-fuse-attention,hl-add-heads{{attention={attention} heads={heads} mask={mask} \
         mask_delay={mask_delay}}})"
    )
}

/// Retargets a model to `size` rows per batch.
pub fn set_batch(size: usize) -> String {
    format!("builtin.module(hl-set-batch{{size={size}}})")
}

/// `source` (named `name`) retargeted to `size` rows per batch, as text:
/// the model `aicf-opt --hl-set-batch` writes, on the same parameters.
pub fn rebatched_source(source: &str, name: &str, size: usize) -> Result<String> {
    let ctx = CompilerContext::new();
    let mut module = ctx.parse(source, name)?;
    // (In the driver's words, not hl-set-batch's.)
    refuse_differentiated(&module, name)?;
    run_pipeline(&ctx, &mut module, &set_batch(size))?;
    Ok(format!("{}\n", module.as_operation()))
}

/// Whether two models are one model at two batch sizes: `other` retargeted
/// to `source`'s batch is `source` (compared as [`identity_text`]). `None`
/// when they are the same model as they are, or when either does not parse
/// or retarget.
pub fn batch_of_same_model(source: &str, other: &str, name: &str) -> Option<usize> {
    use crate::train::data::Signature;
    let own = identity_source(source, name).ok()?;
    if identity_source(other, name).ok()? == own {
        return None;
    }
    let (mine, theirs) =
        (Signature::of_source(source, name).ok()?.batch(), Signature::of_source(other, name).ok()?.batch());
    if mine == theirs {
        return None;
    }
    (identity_source(&rebatched_source(other, name, mine).ok()?, name).ok()? == own).then_some(theirs)
}

/// One compiled artifact.
#[derive(Clone, Debug)]
pub struct Compiled {
    pub manifest: Manifest,
    /// Distinct kernels, and how many of them were compiled rather than
    /// found in the kernel cache.
    pub kernels: usize,
    pub compiled_kernels: usize,
    pub timings: Timings,
}

/// The module as the printer writes it: comments, blank lines, value names
/// and locations gone, attributes in their canonical form. Hashes of it
/// identify a model (its checkpoints, its cached artifacts) however its
/// source is laid out.
pub fn canonical_text(module: &melior::ir::Module<'_>) -> String {
    module.as_operation().to_string()
}

/// [`canonical_text`] of `source`, parsed and verified.
pub fn canonical_source(source: &str, name: &str) -> Result<String> {
    let ctx = CompilerContext::new();
    let module = ctx.parse(source, name)?;
    Ok(canonical_text(&module))
}

/// What identifies a model: its [`canonical_text`] without the name of
/// its weights file (`hl.weights`'s `file`; its `hash` of the bytes stays).
/// An imported model's weights file is named after the model's file, so a
/// renamed `.onnx` file (or a copy) imports as the same model and finds
/// the checkpoints of its runs.
pub fn identity_text(canonical: &str) -> String {
    const KEY: &str = "hl.weights = {file = \"";
    match (canonical.find(KEY), crate::weights::declared_in_text(canonical)) {
        (Some(at), Some(w)) => {
            let file_end = at + KEY.len() + w.file.len() + "\", ".len();
            format!("{}hl.weights = {{{}", &canonical[..at], &canonical[file_end..])
        }
        _ => canonical.to_string(),
    }
}

/// [`identity_text`] of `source`, parsed and verified.
pub fn identity_source(source: &str, name: &str) -> Result<String> {
    Ok(identity_text(&canonical_source(source, name)?))
}

/// The IR hash of `source`: the hash of its [`identity_text`], which
/// checkpoints and manifests carry.
pub fn model_hash(source: &str, name: &str) -> Result<String> {
    Ok(ir_hash(&identity_source(source, name)?))
}

/// Parses `source` (named `name` in diagnostics), retargets it to `batch`
/// rows if asked, runs the train pipeline and generates its kernels into
/// `out_dir`. The artifact's IR hash is the source's ([`model_hash`]) at
/// every batch size, so one checkpoint fits every variant.
pub fn compile_source(
    source: &str,
    name: &str,
    options: &TrainOptions,
    batch: Option<usize>,
    target: &Target,
    out_dir: &Path,
) -> Result<Compiled> {
    let mut timings = Timings::default();
    let ctx = CompilerContext::new();
    let mut module = timings.time("parse and verify", || ctx.parse(source, name))?;
    let hash = ir_hash(&identity_text(&canonical_text(&module)));
    let weights = crate::weights::of_module(&module, name)?;
    // Said by the driver, before hl-set-batch would refuse it in its words.
    refuse_differentiated(&module, name)?;
    if let Some(b) = batch {
        if b == 0 {
            return Err(CompileError::Unsupported(format!("{name}: a batch of 0 rows")));
        }
        timings.time("hl-set-batch", || run_pipeline(&ctx, &mut module, &set_batch(b)))?;
    }
    train_step(&ctx, &mut module, (source, name, batch), options, &mut timings)?;
    // (Its pipeline's text holds no batch: the same at every variant.)
    let settings = ir_hash(&options.train_pipeline());
    let (mut manifest, stats) = codegen::compile(&ctx, &module, &hash, &settings, out_dir, target)?;
    if let Some(w) = weights {
        crate::weights::attach(&mut manifest, out_dir, &w)?;
    }
    timings.extend(stats.timings);
    Ok(Compiled { manifest, kernels: stats.kernels, compiled_kernels: stats.compiled, timings })
}

/// The compile stage of a train step planned again with direct
/// convolutions because their products' window rows did not fit the
/// memory budget: a compile that has it says so (it was silent).
pub const DIRECT_CONVOLUTIONS: &str = "train pipeline, direct convolutions (the budget)";

/// Runs the train pipeline on `module`, which is `source` (named `name`)
/// at `batch` rows. Convolutions as products need their window rows as
/// scratch: where a memory budget cannot be met with them, the step is
/// planned again from the source with direct convolutions, which need
/// none (the timings name that stage).
pub fn train_step<'c>(
    ctx: &'c CompilerContext,
    module: &mut melior::ir::Module<'c>,
    (source, name, batch): (&str, &str, Option<usize>),
    options: &TrainOptions,
    timings: &mut Timings,
) -> Result<()> {
    refuse_differentiated(module, name)?;
    refuse_oversized(module, name)?;
    inline_calls(ctx, module, source)?;
    add_loss_eval(module);
    let planned = timings
        .time("train pipeline (autodiff .. ll-schedule)", || run_pipeline(ctx, module, &options.train_pipeline()));
    let Err(e) = planned else { return Ok(()) };
    if !(options.conv_as_gemm && options.memory_budget.is_some() && over_budget(&e) && source.contains("hl.conv2d")) {
        return Err(e);
    }
    // A budget given as a fraction is of the plan without a budget, the
    // products': the direct plan takes it in bytes (a fraction of its own,
    // smaller plan asked for less than the user had).
    let memory_budget = match (options.memory_budget, budget_bytes(&e)) {
        (Some(MemoryBudget::Fraction(_)), Some(bytes)) => Some(MemoryBudget::Bytes(bytes)),
        (budget, _) => budget,
    };
    let direct = TrainOptions { conv_as_gemm: false, memory_budget, ..options.clone() };
    *module = ctx.parse(source, name)?;
    if let Some(b) = batch {
        run_pipeline(ctx, module, &set_batch(b))?;
    }
    inline_calls(ctx, module, source)?;
    add_loss_eval(module);
    timings.time(DIRECT_CONVOLUTIONS, || run_pipeline(ctx, module, &direct.train_pipeline()))
}

/// The name of `@loss` with its dropout off, which a train step's
/// artifact holds where `@loss` has dropout: a name of the compiler's own
/// (a model's function of any other name is left alone).
pub const LOSS_EVAL: &str = "__aicf_loss_eval";

/// Where `@loss` (its calls inlined) has dropout or noise: adds
/// [`LOSS_EVAL`], a copy whose `hl.dropout`s pass their input on, with the
/// same arguments (dropout's seed and offset then unread where nothing else
/// reads them). The held-out loss is `@loss`'s own without dropout's noise,
/// whatever `@loss` is (an L1 loss, a sum, two targets); it was the squared
/// error or cross-entropy of `@forward`'s output, a figure of another kind,
/// or none (NaN) where the targets did not line up with the output. Noise
/// (`hl.random_like`, a VAE's sample) stays, as PyTorch's `model.eval()`
/// leaves `randn_like` on; a model with it has the copy too, so that it is
/// scored by its own loss. Not where `@loss` sets model state (a batch
/// norm normalising by the batch's statistics in training mode): the copy
/// would too, where PyTorch's `model.eval()` reads the running statistics,
/// so such a model is scored by `@forward` as before. Not twice.
pub fn add_loss_eval(module: &mut melior::ir::Module<'_>) {
    let raw = module.as_operation().to_raw();
    let funcs = crate::ir::functions(raw);
    let named = |n: &str| funcs.iter().find(|(f, _)| crate::ir::string_attr(*f, "sym_name").as_deref() == Some(n));
    let Some(&(loss, block)) = named("loss") else { return };
    let has = |b, op: &str| crate::ir::ops_of(b).into_iter().any(|o| crate::ir::op_name(o) == op);
    let random = has(block, "hl.dropout") || has(block, "hl.random_like");
    if named(LOSS_EVAL).is_some() || !random || has(block, "hl.set_state") {
        return;
    }
    // SAFETY: `loss` is a function of `module`, alive here; the copy is
    // inserted into the module's body (which owns it from then on) before
    // anything else reads it, and each dropout is erased after its one
    // result's uses moved to its input.
    unsafe {
        use mlir_sys::*;
        let copy = mlirOperationClone(loss);
        let ctx = mlirOperationGetContext(loss);
        let name = MlirStringRef { data: LOSS_EVAL.as_ptr().cast(), length: LOSS_EVAL.len() };
        let attr = mlirStringAttrGet(ctx, name);
        mlirOperationSetAttributeByName(copy, mlirStringRefCreateFromCString(c"sym_name".as_ptr()), attr);
        mlirBlockInsertOwnedOperationAfter(mlirOperationGetBlock(loss), loss, copy);
        let body = mlirRegionGetFirstBlock(mlirOperationGetRegion(copy, 0));
        for op in crate::ir::ops_of(body).into_iter().filter(|&o| crate::ir::op_name(o) == "hl.dropout") {
            mlirValueReplaceAllUsesOfWith(mlirOperationGetResult(op, 0), mlirOperationGetOperand(op, 0));
            mlirOperationDestroy(op);
        }
    }
}

/// A model whose `@loss` calls `@forward` (or any function): the calls
/// inlined first, as `aicf-opt --inline` does (without its canonicalizing
/// pipeline), since autodiff differentiates one function's body. `@forward`
/// and `@loss` stay, made public where they were private (the inliner
/// erases a private function no call is left to).
pub fn inline_calls(ctx: &CompilerContext, module: &mut melior::ir::Module<'_>, source: &str) -> Result<()> {
    if source.contains("call @") || source.contains("\"func.call\"") {
        for (func, _) in crate::ir::functions(module.as_operation().to_raw()) {
            if matches!(crate::ir::string_attr(func, "sym_name").as_deref(), Some("forward" | "loss")) {
                // SAFETY: `func` is an operation of `module`, alive here.
                unsafe {
                    mlir_sys::mlirOperationRemoveAttributeByName(
                        func,
                        mlir_sys::mlirStringRefCreateFromCString(c"sym_visibility".as_ptr()),
                    );
                }
            }
        }
        run_pipeline(ctx, module, "builtin.module(inline{default-pipeline=})")?;
    }
    Ok(())
}

/// Where the model's `@forward` does not compute what its `@loss` trains
/// ([`crate::consistency::forward_differs`]), with calls inlined first (a
/// `@loss` calling `@forward` agrees by construction): a note's text.
/// Nothing where the model does not parse (its error is said where it is
/// compiled).
pub fn forward_differs(source: &str, name: &str) -> Option<String> {
    let ctx = CompilerContext::new();
    let mut module = ctx.parse(source, name).ok()?;
    inline_calls(&ctx, &mut module, source).ok()?;
    crate::consistency::forward_differs(module.as_operation().to_raw())
}

/// The batch a checkpoint's model trained at, where `source` is that
/// model at another batch: the checkpoint's IR `ir` is `source` retargeted,
/// or (a checkpoint a policy grew) its run started from `source`
/// retargeted, `started` being the model hash the checkpoint records.
/// `None` otherwise.
pub fn checkpoint_batch(source: &str, ir: &str, started: Option<&str>, name: &str) -> Option<usize> {
    if let Some(b) = batch_of_same_model(source, ir, name) {
        return Some(b);
    }
    use crate::train::data::Signature;
    let theirs = Signature::of_source(ir, name).ok()?.batch();
    if theirs == Signature::of_source(source, name).ok()?.batch() {
        return None;
    }
    let at = rebatched_source(source, name, theirs).ok()?;
    (model_hash(&at, name).ok()? == started?).then_some(theirs)
}

/// Where the model's `@loss` takes a mean over its batch by hand, with the
/// batch written as a number ([`crate::consistency::batch_constant`]):
/// the op's place, the batch the model was written for and the number.
/// `None` where it does not (or the model does not parse).
pub fn loss_batch_constant(source: &str, name: &str) -> Option<(String, usize, f64)> {
    let batch = crate::train::data::Signature::of_source(source, name).ok()?.batch();
    let ctx = CompilerContext::new();
    let mut module = ctx.parse(source, name).ok()?;
    inline_calls(&ctx, &mut module, source).ok()?;
    let (at, value) = crate::consistency::batch_constant(module.as_operation().to_raw(), batch)?;
    Some((at, batch, value))
}

/// Where the model's `@loss` centres a value on a mean over one value at
/// some batch size ([`crate::consistency::one_value_centring`]). `None`
/// where it does not (or the model does not parse).
pub fn one_value_centring(source: &str, name: &str) -> Option<crate::consistency::Centring> {
    let batch = crate::train::data::Signature::of_source(source, name).ok()?.batch();
    let ctx = CompilerContext::new();
    let mut module = ctx.parse(source, name).ok()?;
    inline_calls(&ctx, &mut module, source).ok()?;
    crate::consistency::one_value_centring(module.as_operation().to_raw(), batch)
}

/// A warning's text for [`loss_batch_constant`]: the model written for a
/// batch of `written` trains batches of `sizes` rows.
pub fn batch_constant_warning(at: &str, written: usize, value: f64, sizes: &[usize]) -> String {
    let sizes: Vec<String> = sizes.iter().map(|s| s.to_string()).collect();
    // (The check matched a division by the count, or a product with its
    // inverse.)
    let how = if value >= 1.0 { "divides" } else { "multiplies" };
    format!(
        "{at}: @loss {how} its sum over the batch by {value}, a number written for a batch of {written}; batches of \
         {} rows here get a loss (and in training gradients) scaled by their size over {written}, as a learning \
         rate would be: take the mean with hl.reduce_mean (or a loss op's reduction = mean), which follows the \
         batch",
        sizes.join(" and ")
    )
}

/// Refuses a model that holds a gradient of its own (`@loss_grad` as
/// `hl-autodiff` writes it, or the optimizer's functions): the optimizer
/// took a hand-written `@loss_grad` for the gradient of `@loss` at fp32
/// (training on it silently) and `hl-autocast` refused it at bf16.
pub fn refuse_differentiated(module: &melior::ir::Module<'_>, name: &str) -> Result<()> {
    let Some((loc, what)) = crate::passes::differentiated(module.as_operation().to_raw()) else { return Ok(()) };
    // SAFETY: a location of `module`'s context, alive here.
    let location = crate::context::describe_location(unsafe { melior::ir::Location::from_raw(loc) });
    Err(CompileError::not_a_model(
        name,
        location,
        format!(
            "the model is differentiated already ({what}): training differentiates @loss itself and appends the \
             optimizer; give the model without it (remove or rename it)"
        ),
    ))
}

/// Refuses a tensor past the 1 TiB one may hold at its place, as the
/// model's own error: the pipeline's first pass said it in its name
/// (`hl-fuse-attention: argument #0: ...` of a model with no attention).
pub fn refuse_oversized(module: &melior::ir::Module<'_>, name: &str) -> Result<()> {
    let Some((loc, message)) = crate::passes::common::oversized(module.as_operation().to_raw()) else { return Ok(()) };
    // SAFETY: a location of `module`'s context, alive here.
    let location = crate::context::describe_location(unsafe { melior::ir::Location::from_raw(loc) });
    Err(CompileError::not_a_model(name, location, message))
}

/// Whether `e` is a memory plan over its budget.
fn over_budget(e: &CompileError) -> bool {
    e.to_string().contains("over the budget")
}

/// The bytes of the budget `e` (`ll-plan-memory`'s error) was over.
fn budget_bytes(e: &CompileError) -> Option<u64> {
    let text = e.to_string();
    let rest = &text[text.find("over the budget of ")? + "over the budget of ".len()..];
    rest.split(' ').next()?.parse().ok()
}

/// The pipeline of a module without a loss (an imported model's forward,
/// inference): fusion, `convert-hl-to-ll`, the memory plan and schedule.
pub const INFERENCE_PIPELINE: &str = "builtin.module(canonicalize,hl-fuse-attention,cse,hl-fuse-gemm-epilogue,\
canonicalize,hl-fuse-reductions,hl-fuse-elementwise,canonicalize,cse,convert-hl-to-ll,ll-plan-memory,ll-schedule)";

/// [`INFERENCE_PIPELINE`] for `target`: convolutions as products on the
/// CPU, direct kernels on a GPU (not yet measured there as products).
pub fn inference_pipeline(target: &Target) -> String {
    match target {
        Target::Cpu(_) => INFERENCE_PIPELINE.to_string(),
        Target::Cuda(_) => INFERENCE_PIPELINE.replace("convert-hl-to-ll,", "convert-hl-to-ll{conv-as-gemm=false},"),
    }
}

/// Compiles every function of `source` as it is (no autodiff, no
/// optimizer) for `target` into `out_dir`: an inference artifact.
pub fn compile_inference(source: &str, name: &str, target: &Target, out_dir: &Path) -> Result<Compiled> {
    let mut timings = Timings::default();
    let ctx = CompilerContext::new();
    let mut module = timings.time("parse and verify", || ctx.parse(source, name))?;
    let hash = ir_hash(&identity_text(&canonical_text(&module)));
    let weights = crate::weights::of_module(&module, name)?;
    timings.time("inference pipeline", || run_pipeline(&ctx, &mut module, &inference_pipeline(target)))?;
    let (mut manifest, stats) = codegen::compile(&ctx, &module, &hash, "", out_dir, target)?;
    if let Some(w) = weights {
        crate::weights::attach(&mut manifest, out_dir, &w)?;
    }
    timings.extend(stats.timings);
    Ok(Compiled { manifest, kernels: stats.kernels, compiled_kernels: stats.compiled, timings })
}

#[cfg(test)]
mod tests {
    use super::{TrainOptions, identity_text, loss_batch_constant};

    /// A regression's `@loss` at a batch of 8 whose last lines are `tail`
    /// (from `%d`, the prediction minus the target, `tensor<8x3xf32>`).
    fn regression(tail: &str) -> String {
        format!(
            "hl.param @w : tensor<3x4xf32> owner \"\" init <zeros>\n\
             func.func @forward(%x: tensor<8x4xf32>) -> tensor<8x3xf32> {{\n\
               %w = hl.get_param @w : tensor<3x4xf32>\n\
               %y = hl.linear %x, %w : tensor<8x4xf32>, tensor<3x4xf32>\n\
               return %y : tensor<8x3xf32>\n}}\n\
             func.func @loss(%x: tensor<8x4xf32>, %t: tensor<8x3xf32>) -> tensor<f32> {{\n\
               %w = hl.get_param @w : tensor<3x4xf32>\n\
               %y = hl.linear %x, %w : tensor<8x4xf32>, tensor<3x4xf32>\n\
               %d = hl.sub %y, %t : tensor<8x3xf32>, tensor<8x3xf32>\n\
               %sq = hl.mul %d, %d : tensor<8x3xf32>, tensor<8x3xf32>\n{tail}\n}}\n"
        )
    }

    /// A mean over the batch written with the batch as a number is found
    /// (divided by the rows or by every summed element, or times its
    /// inverse, the constant on either side); a mean taken by the ops
    /// that follow the batch, and a constant that is no count of the
    /// batch (the half of a squared error), are not.
    #[test]
    fn a_mean_over_the_batch_written_as_a_number_is_found() {
        let found = |tail: &str| loss_batch_constant(&regression(tail), "m.mlir").map(|(_, b, v)| (b, v));
        let sum = "  %s = hl.reduce_sum %sq axes = [0, 1] : tensor<8x3xf32>\n";
        let by = |c: &str, op: &str| {
            format!(
                "{sum}  %c = hl.constant dense<{c}> : tensor<f32>\n  %l = {op} : tensor<f32>, tensor<f32>\n  \
                 return %l : tensor<f32>"
            )
        };
        assert_eq!(found(&by("8.0", "hl.div %s, %c")), Some((8, 8.0)));
        assert_eq!(found(&by("24.0", "hl.div %s, %c")), Some((8, 24.0)));
        assert_eq!(found(&by("0.125", "hl.mul %c, %s")), Some((8, 0.125)));
        assert_eq!(found(&by("0.125", "hl.mul %s, %c")), Some((8, 0.125)));
        // Through a negation, as a log-likelihood's.
        let negated = format!(
            "{sum}  %n = hl.neg %s : tensor<f32>\n  %c = hl.constant dense<8.0> : tensor<f32>\n  %l = hl.div %n, %c \
             : tensor<f32>, tensor<f32>\n  return %l : tensor<f32>"
        );
        assert_eq!(found(&negated), Some((8, 8.0)));
        assert_eq!(found(&by("0.5", "hl.mul %c, %s")), None);
        assert_eq!(found(&by("7.0", "hl.div %s, %c")), None);
        let mean = "  %l = hl.reduce_mean %sq axes = [0, 1] : tensor<8x3xf32>\n  return %l : tensor<f32>";
        assert_eq!(found(mean), None);
        // A sum over the features alone is no sum over the batch.
        let rows = "  %s = hl.reduce_sum %sq axes = [1] : tensor<8x3xf32>\n  %c = hl.constant dense<3.0> : \
                    tensor<8xf32>\n  %r = hl.div %s, %c : tensor<8xf32>, tensor<8xf32>\n  %l = hl.reduce_mean %r \
                    axes = [0] : tensor<8xf32>\n  return %l : tensor<f32>";
        assert_eq!(found(rows), None);
    }

    /// Adam's eps and the parameter groups appear in the pipelines' text
    /// (an artifact's identity) only where they are not the defaults: every
    /// artifact compiled before them keeps its key.
    #[test]
    fn eps_and_groups_are_in_the_text_only_where_asked_for() {
        let default = TrainOptions::default();
        for text in [default.train_pipeline(), default.fusion_pipeline()] {
            assert!(!text.contains("eps=") && !text.contains("decay-min-rank="), "{text}");
        }
        let asked = TrainOptions { eps: 1e-6, decay_min_rank: 2, weight_decay: 0.1, ..TrainOptions::default() };
        for text in [asked.train_pipeline(), asked.fusion_pipeline()] {
            assert!(text.contains(" eps=1e-6") && text.contains(" decay-min-rank=2"), "{text}");
        }
    }

    #[test]
    fn a_models_identity_ignores_its_weights_files_name_not_its_bytes() {
        let text = |file: &str, hash: &str| {
            format!("module attributes {{hl.weights = {{file = \"{file}\", hash = \"{hash}\"}}}} {{\n}}\n")
        };
        let a = identity_text(&text("gpt.weights.safetensors", "00ff"));
        assert_eq!(a, "module attributes {hl.weights = {hash = \"00ff\"}} {\n}\n");
        assert_eq!(a, identity_text(&text("renamed.weights.safetensors", "00ff")));
        assert_ne!(a, identity_text(&text("gpt.weights.safetensors", "00fe")));
        // Without weights, and with a name the text reading cannot undo,
        // the text is its own identity.
        assert_eq!(identity_text("module {\n}\n"), "module {\n}\n");
        let escaped = text("a\\\"b.safetensors", "00ff");
        assert_eq!(identity_text(&escaped), escaped);
    }
}
