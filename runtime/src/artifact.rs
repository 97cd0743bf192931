//! The compiled module on disk: a directory holding `manifest.json` (this
//! module's types) and `kernels.so`, the host code the compiler generated.
//!
//! ```text
//! model.aicf/
//!   manifest.json   format, IR hash, target, parameter/state table,
//!                   constants, and per function: its arguments (by binding
//!                   tag), arena size and the kernel calls in program order
//!   kernels.so      one exported symbol per distinct kernel, named by the
//!                   hash of its code (identical kernels share one):
//!                   void aicf_<hash>(int64_t begin, int64_t end, void **buffers)
//! ```
//!
//! A GPU artifact holds PTX modules instead (`ptx_<hash>_<chip>.ptx`, listed
//! per chip in the manifest's `ptx`), each entry `aicf_<hash>(i64 work,
//! buffers...)` named by the hash of its code.
//!
//! The LLVM IR the kernels were compiled from lies in the compiler's kernel
//! cache (`$AICF_CACHE_DIR/kernels`, for reading; the runtime does not need
//! it).
//!
//! A call runs rows `[begin, end)` of its `work`; the runtime splits the
//! range over threads when the call is large enough (`grain` rows per piece
//! at least). `buffers[i]` is the address of operand `i`: an argument, a byte
//! offset in the function's arena, or a constant.

use serde::{Deserialize, Serialize};

/// Bumped whenever a field changes meaning.
pub const FORMAT: u32 = 2;

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Manifest {
    pub format: u32,
    /// Hash of the `hl` module the artifact was compiled from: checkpoints
    /// carry it, so that one cannot be loaded into a different model.
    pub ir_hash: String,
    /// What the kernels were compiled for (`x86_64 cpu haswell +avx2 +fma`).
    pub target: String,
    /// Parameters, then optimizer state, in declaration order.
    pub symbols: Vec<Symbol>,
    pub constants: Vec<Constant>,
    pub functions: Vec<Function>,
    /// A GPU artifact's PTX modules, per chip (`sm_80`, `sm_90`): files of
    /// the artifact directory, each holding some of the kernels (empty:
    /// `kernels.<chip>.ptx` holds them all).
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub ptx: std::collections::BTreeMap<String, Vec<String>>,
    /// The CPU features the host code was compiled for (`+avx512f`, ...):
    /// a host without one of them refuses the artifact instead of dying of
    /// an illegal instruction. The runtime tests the x86 SIMD families
    /// (SSE3 to AVX-512, F16C, FMA, BMI, GFNI, VAES, ...); a feature it
    /// cannot test is taken as present, and the compiler's cache key (the
    /// host it compiled on) stands for it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cpu_features: Vec<String>,
    /// Each kernel file of the artifact (`kernels.so`, the PTX modules) and
    /// the hash of its bytes: a truncated or replaced file is refused.
    #[serde(default)]
    pub files: std::collections::BTreeMap<String, String>,
    /// The file of the artifact directory (safetensors) holding the values
    /// of its `init <data>` parameters (an imported model's weights); it is
    /// one of `files`, so its hash is checked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weights: Option<String>,
    /// The hash of the train step's settings (optimizer and its
    /// hyper-parameters, precision, padding, accumulation, data
    /// parallelism: its pipeline less the batch); empty for an inference
    /// artifact. A variant at another batch size must share them (one
    /// compiled with other flags was taken, and its steps trained
    /// otherwise).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub settings: String,
    /// The hash of this manifest written with an empty checksum: an edited
    /// manifest is refused.
    #[serde(default)]
    pub checksum: String,
}

impl Manifest {
    /// The PTX files of `chip` in an artifact directory.
    pub fn ptx_files(&self, chip: &str) -> Vec<String> {
        match self.ptx.get(chip) {
            Some(files) => files.clone(),
            None => vec![format!("kernels.{chip}.ptx")],
        }
    }
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Symbol {
    pub name: String,
    /// "param", "state", or "accumulator" ([`ACCUMULATOR`]).
    pub kind: String,
    pub shape: Vec<usize>,
    pub dtype: DType,
    /// The initializer text of a parameter ([`crate::init::Init::parse`]);
    /// state starts at zero.
    pub init: Option<String>,
}

/// The kind of a gradient accumulator's symbol (`hl.state ... slot
/// "grad_sum"`): a sum over a step's micro-batches, which the next step's
/// first micro-batch replaces, so neither checkpointed nor part of a
/// trainer's state.
pub const ACCUMULATOR: &str = "accumulator";

impl Symbol {
    /// Whether this is a gradient accumulator ([`ACCUMULATOR`]).
    pub fn is_accumulator(&self) -> bool {
        self.kind == ACCUMULATOR
    }
}

#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq, Hash)]
#[serde(rename_all = "lowercase")]
pub enum DType {
    F32,
    F64,
    I32,
    I64,
    I1,
    /// Raw bytes (the arena).
    U8,
    /// IEEE half precision (GPU GEMM operands).
    F16,
    /// bfloat16: f32's exponent with 7 fraction bits (GPU GEMM operands).
    BF16,
}

impl DType {
    pub fn bytes(self) -> usize {
        match self {
            DType::F64 | DType::I64 => 8,
            DType::F32 | DType::I32 => 4,
            DType::F16 | DType::BF16 => 2,
            DType::I1 | DType::U8 => 1,
        }
    }

    /// The largest finite value of a 16- or 32-bit float type (a larger
    /// one would be stored as an infinity); `None` for f64 and integers.
    pub fn largest_float(self) -> Option<f64> {
        match self {
            DType::F32 => Some(f32::MAX as f64),
            DType::BF16 => Some(half::bf16::MAX.to_f64()),
            DType::F16 => Some(half::f16::MAX.to_f64()),
            _ => None,
        }
    }
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Constant {
    pub shape: Vec<usize>,
    pub dtype: DType,
    /// JSON has no infinities or NaN: those are written as the strings
    /// `"inf"`, `"-inf"` and `"nan"`.
    #[serde(with = "non_finite")]
    pub values: Vec<f64>,
}

/// Numbers that may be infinite or NaN, as JSON numbers or strings.
mod non_finite {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    #[derive(Serialize, Deserialize)]
    #[serde(untagged)]
    pub(super) enum Value {
        Number(f64),
        Text(String),
    }

    impl Value {
        pub(super) fn of(v: f64) -> Value {
            match v {
                v if v.is_finite() => Value::Number(v),
                v if v.is_nan() => Value::Text("nan".into()),
                v if v > 0.0 => Value::Text("inf".into()),
                _ => Value::Text("-inf".into()),
            }
        }

        pub(super) fn number(self) -> Result<f64, String> {
            match self {
                Value::Number(x) => Ok(x),
                Value::Text(t) => match t.as_str() {
                    "inf" => Ok(f64::INFINITY),
                    "-inf" => Ok(f64::NEG_INFINITY),
                    "nan" => Ok(f64::NAN),
                    other => Err(format!("'{other}' is not a number")),
                },
            }
        }
    }

    pub fn serialize<S: Serializer>(values: &[f64], s: S) -> Result<S::Ok, S::Error> {
        values.iter().map(|&v| Value::of(v)).collect::<Vec<_>>().serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<f64>, D::Error> {
        let raw = Vec::<Value>::deserialize(d)?;
        raw.into_iter().map(|v| v.number().map_err(serde::de::Error::custom)).collect()
    }
}

/// One number that may be infinite or NaN, as [`non_finite`] writes each.
mod non_finite_scalar {
    use super::non_finite::Value;
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    pub fn serialize<S: Serializer>(value: &f64, s: S) -> Result<S::Ok, S::Error> {
        Value::of(*value).serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
        Value::deserialize(d)?.number().map_err(serde::de::Error::custom)
    }
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Function {
    pub name: String,
    pub args: Vec<Arg>,
    pub arena_bytes: u64,
    pub calls: Vec<Call>,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Arg {
    /// The `ll.bind` tag: "input", "lr", "loss", "result N", "param @x",
    /// "state @x" or "arena".
    pub bind: String,
    pub shape: Vec<usize>,
    pub dtype: DType,
}

/// What an argument is to the caller of its function.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Role {
    /// Supplied by the caller: data, labels, the learning rate.
    Input,
    /// Written by the function and handed back: the loss, results.
    Output,
    /// A parameter or optimizer-state symbol, owned by the session.
    Symbol(String),
    /// The function's scratch memory.
    Arena,
}

impl Arg {
    pub fn role(&self) -> Role {
        if self.bind == "arena" {
            Role::Arena
        } else if let Some(s) = self.bind.strip_prefix("param @").or_else(|| self.bind.strip_prefix("state @")) {
            Role::Symbol(s.to_string())
        } else if self.bind == "loss" || self.bind.starts_with("result") {
            Role::Output
        } else {
            Role::Input
        }
    }

    pub fn bytes(&self) -> usize {
        self.shape.iter().fold(self.dtype.bytes(), |n, &d| n.saturating_mul(d))
    }
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Call {
    /// The exported symbol in `kernels.so`.
    pub symbol: String,
    /// The `ll` op it implements, for errors and profiles.
    pub op: String,
    /// Where the `hl` op it came from is written (`model.mlir:41:10`, or
    /// several for a fused kernel), for profiles.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub origin: Option<String>,
    /// Rows of work; the kernel runs `[begin, end)` of them.
    pub work: u64,
    /// Floating-point operations of the `ll` op this call starts (matrix
    /// products, convolutions and attention: 2 per multiply-add; 0 for the
    /// rest and for an op's later kernels): what FLOP counts and MFU sum.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub flops: u64,
    /// The fewest rows worth a thread of their own.
    pub grain: u64,
    pub buffers: Vec<Buffer>,
    /// The bytes each buffer spans (the operand's shape times its element
    /// size): the loader checks every one lies inside its argument, the
    /// arena or its constant, so no kernel can reach outside its memory.
    pub bytes: Vec<u64>,
    /// Integer operands whose values must be valid indices: checked before
    /// the call, so that a bad label is an error, not a wild read.
    pub index_checks: Vec<IndexCheck>,
    /// For a GEMM: the library candidate the kernel registry may run
    /// instead of the generated kernel.
    #[serde(default)]
    pub library: Option<LibraryGemm>,
    /// On the GPU: the launch shape (the compiler's, from the `gpu.func`'s
    /// `known_block_size`/`known_grid_size` attributes). The kernel's
    /// parameters are `(i64 work, buffer pointers...)`.
    #[serde(default)]
    pub launch: Option<Launch>,
    /// The schedule (`ll-schedule`): the stream this call runs on, the
    /// events it waits for first, and the event it records after it. The
    /// CPU runs calls in program order and ignores them.
    #[serde(default)]
    pub stream: u32,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub waits: Vec<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event: Option<u32>,
    /// A collective of a data-parallel step (`ll.all_reduce`), which the
    /// runtime's communicator runs on `buffers` instead of a kernel
    /// (`symbol` is empty); a session without one (a single process) leaves
    /// the buffers as they are.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub collective: Option<Collective>,
}

/// What a collective call does. Its buffers are the ones it sums, then the
/// weight each replica scales its own by (an f32 scalar).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Collective {
    pub op: CollectiveOp,
    /// Each summed buffer's element type.
    pub dtypes: Vec<DType>,
}

#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum CollectiveOp {
    /// Each buffer becomes the element-wise sum over the replicas of the
    /// buffer times the replica's weight.
    AllReduceSum,
    /// Each buffer times this replica's weight, summed over nothing (a
    /// micro-batch's share of an accumulated gradient: `ll.all_reduce
    /// {local}`), in a group or alone.
    Scale,
}

/// A CUDA launch: grid and block dimensions and dynamic shared memory.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct Launch {
    pub grid: [u32; 3],
    pub block: [u32; 3],
    pub shared_bytes: u32,
}

/// A GEMM as a library call: `out[b] = alpha * A[b] B[b]` for each of
/// `batch` products (row-major `out`, `m x n`), A and B read through their
/// strides in elements (`[row, column]`, and per batch), then `epilogue`
/// (bias, activation, mask, residual, lhs_sum) as a generated row kernel.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct LibraryGemm {
    pub batch: usize,
    pub m: usize,
    pub n: usize,
    pub k: usize,
    pub a_strides: [usize; 2],
    pub b_strides: [usize; 2],
    pub a_batch: usize,
    pub b_batch: usize,
    /// Infinite or NaN where the model scales a product by such a constant
    /// (written as `"inf"`, `"-inf"`, `"nan"`: JSON has no such numbers,
    /// and `null` made the artifact unloadable).
    #[serde(with = "non_finite_scalar")]
    pub alpha: f64,
    /// Operand positions of A, B and the output.
    pub a: usize,
    pub b: usize,
    pub out: usize,
    /// Operands the epilogue reads at the output's index (mask, residual):
    /// the library path is off when one shares the output's memory.
    pub aliases: Vec<usize>,
    pub epilogue: Option<String>,
    /// A and B are this 16-bit type (f16, bf16): the library candidates
    /// multiply f32 copies of them into an f32 product, which the epilogue
    /// (then always present) reads as one buffer more, after the call's,
    /// and rounds into the output.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub widen: Option<DType>,
    /// A GPU GEMM whose whole epilogue cuBLASLt can apply (the CPU runs
    /// its epilogues as `epilogue`); absent on the CPU.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu: Option<GpuGemm>,
}

impl LibraryGemm {
    /// Whether the elements this GEMM reads and writes (A and B through
    /// their strides, each product at its batch stride; the output's
    /// `batch * m * n`) lie inside its operands' extents `bytes` (a call's
    /// `bytes`), so that a manifest's sizes cannot make the runtime's own
    /// GEMMs reach outside their memory; why not, where they do not.
    /// Element sizes: a GPU GEMM's operand and output types, a widened
    /// one's 16-bit operands (its output at 2 bytes, the least it could
    /// be), else f32.
    pub fn fits(&self, bytes: &[u64]) -> Result<(), String> {
        let (narrow, wide) = match (&self.gpu, self.widen) {
            (Some(g), _) => (g.operands.bytes() as u128, g.output.bytes() as u128),
            (None, Some(d)) => (d.bytes() as u128, d.bytes() as u128),
            (None, None) => (4, 4),
        };
        // The last element reached, plus one, of `batch` blocks of `rows x
        // cols` at `strides`, `step` apart.
        let span = |rows: usize, cols: usize, [rs, cs]: [usize; 2], step: usize| -> u128 {
            if self.batch == 0 || rows == 0 || cols == 0 {
                return 0;
            }
            let last = |n: usize, s: usize| (n as u128 - 1) * s as u128;
            last(self.batch, step) + last(rows, rs) + last(cols, cs) + 1
        };
        let (mut a, mut b) =
            (span(self.m, self.k, self.a_strides, self.a_batch), span(self.k, self.n, self.b_strides, self.b_batch));
        if self.widen.is_some() {
            // Widened whole: `a_batch * batch` elements (or `m * k`).
            let whole = |step: usize, rows: usize, cols: usize| {
                if step > 0 { step as u128 * self.batch as u128 } else { rows as u128 * cols as u128 }
            };
            a = a.max(whole(self.a_batch, self.m, self.k));
            b = b.max(whole(self.b_batch, self.k, self.n));
        }
        let out = self.batch as u128 * self.m as u128 * self.n as u128;
        for (what, operand, elements, size) in
            [("A", self.a, a, narrow), ("B", self.b, b, narrow), ("output", self.out, out, wide)]
        {
            let room = bytes.get(operand).copied().unwrap_or(0) as u128;
            if elements * size > room {
                return Err(format!(
                    "{what} (operand {operand}) reaches {elements} elements of {size} bytes, past its {room} bytes"
                ));
            }
        }
        Ok(())
    }

    /// `batch` products of `m x k` by `k x n`, f32, alpha 1, no epilogue,
    /// with contiguous operands each stored as itself or as its transpose
    /// (`ta`, `tb`): the GEMMs that tests and benchmarks of the candidates
    /// build.
    pub fn contiguous(batch: usize, (m, n, k): (usize, usize, usize), ta: bool, tb: bool) -> LibraryGemm {
        LibraryGemm {
            batch,
            m,
            n,
            k,
            a_strides: if ta { [1, m] } else { [k, 1] },
            b_strides: if tb { [1, k] } else { [n, 1] },
            a_batch: m * k,
            b_batch: k * n,
            alpha: 1.0,
            a: 0,
            b: 1,
            out: 2,
            aliases: vec![],
            epilogue: None,
            widen: None,
            gpu: None,
        }
    }
}

/// What cuBLASLt needs beyond the product's shape for a GPU GEMM.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct GpuGemm {
    /// Operand position of the bias (one value per output column), and its
    /// element type.
    pub bias: Option<(usize, DType)>,
    /// `ll.gemm act`: 0 none, 1 ReLU, 3 tanh-GELU (the ones cuBLASLt has).
    pub act: i64,
    /// The product is added to the output (beta = 1).
    pub accumulate: bool,
    /// Element types of A and B (the same), and of the output.
    pub operands: DType,
    pub output: DType,
}

#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "lowercase")]
pub enum Buffer {
    Arg { index: usize },
    Arena { offset: u64 },
    Constant { index: usize },
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct IndexCheck {
    /// Operand position in `buffers`, its element type and count.
    pub operand: usize,
    pub dtype: DType,
    pub count: usize,
    /// Valid values are `[0, bound)`, plus `allowed` (an ignore index).
    pub bound: i64,
    pub allowed: Option<i64>,
    pub what: String,
}

/// The manifest as the JSON that `manifest.json` holds.
pub fn to_json(m: &Manifest) -> Result<String, serde_json::Error> {
    serde_json::to_string_pretty(m)
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl Function {
    /// The floating-point operations of one call of this function (see
    /// [`Call::flops`]).
    pub fn flops(&self) -> u64 {
        self.calls.iter().map(|c| c.flops).sum()
    }
}

const FNV_OFFSET: u64 = 0xcbf29ce484222325;

fn fnv1a(mut h: u64, bytes: &[u8]) -> u64 {
    for &b in bytes {
        h ^= b as u64;
        h = h.wrapping_mul(0x100000001b3);
    }
    h
}

/// FNV-1a 64 of `bytes`, in hex.
pub fn bytes_hash(bytes: &[u8]) -> String {
    format!("{:016x}", fnv1a(FNV_OFFSET, bytes))
}

/// [`bytes_hash`] of the file at `path`, read in pieces (a data set or a
/// kernel library is never held in memory whole for it).
pub fn file_hash(path: &std::path::Path) -> std::io::Result<String> {
    reader_hash(std::fs::File::open(path)?)
}

/// [`file_hash`] of what `reader` reads to its end (a decompressed
/// stream's bytes).
pub fn reader_hash(mut reader: impl std::io::Read) -> std::io::Result<String> {
    let mut buffer = vec![0u8; 1 << 16];
    let mut h = FNV_OFFSET;
    loop {
        match reader.read(&mut buffer)? {
            0 => return Ok(format!("{h:016x}")),
            n => h = fnv1a(h, &buffer[..n]),
        }
    }
}

impl Manifest {
    /// The checksum of this manifest: its JSON with an empty checksum.
    pub fn compute_checksum(&self) -> String {
        let blank = Manifest { checksum: String::new(), ..self.clone() };
        bytes_hash(to_json(&blank).unwrap_or_default().as_bytes())
    }

    /// Sets `files` to the hashes of `names` in `dir`, then the checksum.
    pub fn seal(&mut self, dir: &std::path::Path, names: &[String]) -> std::io::Result<()> {
        self.files.clear();
        for name in names {
            self.files.insert(name.clone(), file_hash(&dir.join(name))?);
        }
        self.checksum = self.compute_checksum();
        Ok(())
    }
}

/// FNV-1a 64 of `text`, in hex: the IR hash manifests and checkpoints carry.
/// Arguments' names (`hl.name`, an imported model's input names, which
/// arrays are matched by) are not the model: the hash is of the text
/// without them, as it was before an import wrote them (its checkpoints
/// read as of another model).
pub fn ir_hash(text: &str) -> String {
    let unnamed = without_argument_names(text);
    let mut h: u64 = 0xcbf29ce484222325;
    for b in unnamed.bytes() {
        h ^= b as u64;
        h = h.wrapping_mul(0x100000001b3);
    }
    format!("{h:016x}")
}

/// `text` without its `hl.name = "..."` argument attributes: a dictionary
/// of that alone goes whole (` {hl.name = "x"}`), else the entry and its
/// comma. (MLIR prints a string's quote as `\22`: the first `"` after the
/// opening one closes it.)
fn without_argument_names(text: &str) -> std::borrow::Cow<'_, str> {
    const KEY: &str = "hl.name = \"";
    if !text.contains(KEY) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(KEY) {
        let Some(close) = rest[at + KEY.len()..].find('"') else { break };
        let end = at + KEY.len() + close + 1;
        let (before, after) = (&rest[..at], &rest[end..]);
        if before.ends_with(" {") && after.starts_with('}') {
            out.push_str(&before[..before.len() - 2]);
            rest = &after[1..];
        } else if before.ends_with(", ") {
            out.push_str(&before[..before.len() - 2]);
            rest = after;
        } else if after.starts_with(", ") {
            out.push_str(before);
            rest = &after[2..];
        } else {
            out.push_str(&rest[..end]);
            rest = after;
        }
    }
    out.push_str(rest);
    std::borrow::Cow::Owned(out)
}

/// Reads and checks `dir/manifest.json`: the format this runtime reads, the
/// manifest's checksum, every kernel file's hash, and every call's buffers
/// (each names a buffer the function has, and spans bytes that lie inside
/// it), so that nothing a manifest says can make a kernel reach outside its
/// memory.
/// The largest `manifest.json` [`load_manifest`] reads.
pub const MAX_MANIFEST_BYTES: u64 = 1 << 30;

pub fn load_manifest(dir: &std::path::Path) -> crate::error::Result<Manifest> {
    use crate::error::RuntimeError;
    let path = dir.join("manifest.json");
    let fail = |path: &std::path::Path, message: String| RuntimeError::Load { path: path.to_path_buf(), message };
    // A model's source or a missing path, said as such ("manifest.json:
    // Not a directory" named neither).
    match std::fs::metadata(dir) {
        Err(e) => return Err(fail(dir, format!("{e}: no compiled artifact here (`aicf compile` writes one)"))),
        Ok(m) if !m.is_dir() => {
            return Err(fail(
                dir,
                "a file, not a compiled artifact (a directory of manifest.json and kernels.so, which `aicf compile` \
                 writes)"
                    .into(),
            ));
        }
        Ok(_) => {}
    }
    // A manifest is kilobytes (megabytes for the largest models); a huge
    // or endless file (a device) is not one, and is not read whole.
    let size = std::fs::metadata(&path).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => fail(
            dir,
            "a directory without manifest.json: not a compiled artifact (a directory of manifest.json and \
             kernels.so, which `aicf compile` writes)"
                .into(),
        ),
        _ => fail(&path, e.to_string()),
    })?;
    if !size.is_file() || size.len() > MAX_MANIFEST_BYTES {
        return Err(fail(&path, format!("not a manifest file of at most {MAX_MANIFEST_BYTES} bytes")));
    }
    let text = std::fs::read_to_string(&path).map_err(|e| fail(&path, e.to_string()))?;
    let manifest: Manifest =
        serde_json::from_str(&text).map_err(|e| fail(&path, format!("not a valid manifest: {e}")))?;
    if manifest.format != FORMAT {
        return Err(fail(
            &path,
            format!("format {} (this runtime reads {FORMAT}); compile the model again", manifest.format),
        ));
    }
    if manifest.checksum != manifest.compute_checksum() {
        return Err(fail(&path, "the manifest was modified after it was written (its checksum differs)".into()));
    }
    for (name, hash) in &manifest.files {
        let file = dir.join(name);
        // A device or a pipe (kernels.so linked to /dev/zero) is no
        // kernel file: hashing it never ended.
        match std::fs::metadata(&file) {
            Ok(m) if !m.is_file() => return Err(fail(&file, "not a regular file".into())),
            Err(e) => return Err(fail(&file, e.to_string())),
            Ok(_) => {}
        }
        if file_hash(&file).map_err(|e| fail(&file, e.to_string()))? != *hash {
            return Err(fail(&file, "truncated or modified since it was compiled (its hash differs)".into()));
        }
    }
    if let Some(w) = &manifest.weights
        && (!manifest.files.contains_key(w) || w.contains(['/', '\\']))
    {
        return Err(fail(&path, format!("weights file '{w}' is not one of the artifact's checked files")));
    }
    for f in &manifest.functions {
        let has_arena = f.args.iter().any(|a| a.bind == "arena");
        for (k, c) in f.calls.iter().enumerate() {
            let at = |m: String| fail(&path, format!("@{} call #{k}: {m}", f.name));
            if c.bytes.len() != c.buffers.len() {
                return Err(at(format!("{} buffers but {} extents", c.buffers.len(), c.bytes.len())));
            }
            for (b, &bytes) in c.buffers.iter().zip(&c.bytes) {
                let room = match *b {
                    Buffer::Arg { index } => {
                        f.args.get(index).map(|a| if a.bind == "arena" { f.arena_bytes } else { a.bytes() as u64 })
                    }
                    Buffer::Arena { offset } if has_arena => Some(f.arena_bytes.saturating_sub(offset)),
                    Buffer::Arena { .. } => None,
                    Buffer::Constant { index } => {
                        manifest.constants.get(index).map(|c| (c.values.len() * c.dtype.bytes()) as u64)
                    }
                };
                match room {
                    None => return Err(at(format!("names {b:?}, which the function lacks"))),
                    Some(room) if bytes > room => {
                        return Err(at(format!("{b:?} spans {bytes} bytes, but only {room} are there")));
                    }
                    _ => {}
                }
            }
            let operands = c.buffers.len();
            let out_of_range =
                c.index_checks.iter().map(|i| i.operand).chain(
                    c.library.iter().flat_map(|g| [g.a, g.b, g.out].into_iter().chain(g.aliases.iter().copied())),
                );
            if let Some(bad) = out_of_range.into_iter().find(|&o| o >= operands) {
                return Err(at(format!("refers to operand {bad} of {operands}")));
            }
            // (A CUDA GEMM's element types are known where cuBLASLt takes
            // its epilogue, `gpu`; the others are the device's to check.)
            if let Some(g) = &c.library
                && (g.gpu.is_some() || !manifest.target.starts_with("cuda"))
                && let Err(m) = g.fits(&c.bytes)
            {
                return Err(at(format!("its library GEMM {m}")));
            }
            if let Some(coll) = &c.collective {
                if coll.dtypes.len() + 1 != operands || c.bytes.last() != Some(&4) {
                    return Err(at(format!(
                        "a collective of {operands} buffers with {} types (the summed buffers, then an f32 weight)",
                        coll.dtypes.len()
                    )));
                }
                if let Some((bytes, t)) = c.bytes.iter().zip(&coll.dtypes).find(|(b, t)| **b % t.bytes() as u64 != 0) {
                    return Err(at(format!("a collective buffer of {bytes} bytes is not a whole number of {t:?}")));
                }
            }
        }
    }
    Ok(manifest)
}

#[cfg(test)]
mod tests {
    /// An argument's name leaves the IR hash as it was without it.
    #[test]
    fn argument_names_do_not_change_the_ir_hash() {
        let plain = "func.func @f(%arg0: tensor<4xf32>, %arg1: tensor<4xi32> {hl.fill = 1.0 : f64}) {";
        let named = "func.func @f(%arg0: tensor<4xf32> {hl.name = \"x\"}, %arg1: tensor<4xi32> {hl.fill = 1.0 : f64, \
                     hl.name = \"attention_mask\"}) {";
        assert_eq!(super::without_argument_names(named), plain);
        assert_eq!(super::ir_hash(named), super::ir_hash(plain));
        let first = r#"func.func @f(%arg0: tensor<4xf32> {hl.name = "a\22b", hl.zeta = 1 : i64}) {"#;
        assert_eq!(super::without_argument_names(first), "func.func @f(%arg0: tensor<4xf32> {hl.zeta = 1 : i64}) {");
        assert_ne!(super::ir_hash(plain), super::ir_hash("func.func @g() {"));
    }

    use super::{Constant, DType};

    /// A constant's infinities and NaN survive the manifest's JSON.
    #[test]
    fn non_finite_constants_round_trip() {
        let c = Constant {
            shape: vec![4],
            dtype: DType::BF16,
            values: vec![f64::NEG_INFINITY, 0.5, f64::INFINITY, f64::NAN],
        };
        let text = serde_json::to_string(&c).unwrap();
        assert!(text.contains("\"-inf\"") && text.contains("\"nan\""), "{text}");
        let back: Constant = serde_json::from_str(&text).unwrap();
        assert_eq!(back.values[..3], c.values[..3]);
        assert!(back.values[3].is_nan());
        assert!(serde_json::from_str::<Constant>(r#"{"shape":[1],"dtype":"f32","values":["big"]}"#).is_err());
    }

    /// A library GEMM fits the operands it was made for, and one whose
    /// sizes say more than its operands hold (a manifest edited and sealed
    /// again: the runtime's own GEMM read and wrote past them) is refused.
    #[test]
    fn a_library_gemm_is_refused_past_its_operands() {
        let g = super::LibraryGemm::contiguous(3, (4, 5, 6), true, false);
        let bytes = [3 * 4 * 6 * 4, 3 * 6 * 5 * 4, 3 * 4 * 5 * 4];
        assert_eq!(g.fits(&bytes), Ok(()));
        let more = super::LibraryGemm { m: 4 * 64, ..g.clone() };
        assert!(more.fits(&bytes).unwrap_err().starts_with("A (operand 0) reaches"));
        let deeper = super::LibraryGemm { k: usize::MAX, ..g.clone() };
        assert!(deeper.fits(&bytes).is_err());
        let swapped = super::LibraryGemm { b: 2, out: 1, ..g.clone() };
        assert!(swapped.fits(&[3 * 4 * 6 * 4, 3 * 6 * 5 * 4, 3 * 4 * 4]).is_err());
        // 16-bit operands at 2 bytes: a GPU GEMM's by its types (it has no
        // `widen`: counted as f32, every bf16 CUDA artifact was refused),
        // a widened CPU one's by `widen`.
        let half = [3 * 4 * 6 * 2, 3 * 6 * 5 * 2, 3 * 4 * 5 * 2];
        let gpu = super::GpuGemm { bias: None, act: 0, accumulate: false, operands: DType::BF16, output: DType::BF16 };
        assert_eq!(super::LibraryGemm { gpu: Some(gpu), ..g.clone() }.fits(&half), Ok(()));
        assert_eq!(super::LibraryGemm { widen: Some(DType::BF16), ..g.clone() }.fits(&half), Ok(()));
        assert!(g.fits(&half).is_err());
    }

    /// A library GEMM's alpha may be infinite or NaN (a model scaling a
    /// product by such a constant): it round-trips, where `null` made the
    /// artifact unloadable; a finite one stays a JSON number.
    #[test]
    fn non_finite_alpha_round_trips() {
        for alpha in [f64::INFINITY, f64::NEG_INFINITY, f64::NAN, 0.5] {
            let g = super::LibraryGemm { alpha, ..super::LibraryGemm::contiguous(1, (2, 3, 4), false, false) };
            let text = serde_json::to_string(&g).unwrap();
            assert!(!text.contains("\"alpha\":null"), "{text}");
            let back: super::LibraryGemm = serde_json::from_str(&text).unwrap();
            assert!(back.alpha == alpha || (alpha.is_nan() && back.alpha.is_nan()), "{alpha}: {text}");
        }
        let g = super::LibraryGemm::contiguous(1, (2, 3, 4), false, false);
        assert!(serde_json::to_string(&g).unwrap().contains("\"alpha\":1.0"));
    }
}
