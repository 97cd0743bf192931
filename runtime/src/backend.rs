//! The seam between training and devices: one [`Backend`] interface that
//! the CPU ([`crate::cpu::CpuSession`]) and CUDA
//! ([`crate::cuda::CudaSession`]) sessions implement, so that a trainer,
//! a checkpoint or a benchmark is written once for every device.
//!
//! A backend holds one model's parameters and optimizer state (its symbol
//! table) and the compiled modules that run on them: the artifact it was
//! opened with, and variants of the same model compiled for other input
//! shapes (a smaller last batch). A call runs the module compiled for its
//! inputs' shapes. Checkpoints are written from the symbol table, byte for
//! byte, so a checkpoint written on one device loads on any other.

use crate::artifact::{Function, Manifest};
use crate::checkpoint::{self, CheckpointError, Entry};
use crate::error::{Result, RuntimeError};
use crate::host::{Tensor, read_values, write_values};
use std::collections::BTreeMap;
use std::path::Path;

/// Where a model runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Device {
    /// The host CPU, with `threads` worker threads (0: one per core).
    Cpu { threads: usize },
    /// NVIDIA GPU number `ordinal`.
    Cuda { ordinal: usize },
}

impl Default for Device {
    fn default() -> Self {
        Device::Cpu { threads: 0 }
    }
}

impl Device {
    /// `cpu`, `cuda` or `cuda:N`.
    pub fn parse(text: &str) -> std::result::Result<Device, String> {
        match text.split_once(':') {
            None if text == "cpu" => Ok(Device::Cpu { threads: 0 }),
            None if text == "cuda" => Ok(Device::Cuda { ordinal: 0 }),
            Some(("cuda", n)) => n
                .parse()
                .map(|ordinal| Device::Cuda { ordinal })
                .map_err(|_| format!("'{text}': the GPU number '{n}' is not a number")),
            _ => Err(format!("'{text}' is not a device (cpu, cuda or cuda:N)")),
        }
    }

    pub fn is_cuda(&self) -> bool {
        matches!(self, Device::Cuda { .. })
    }
}

impl std::fmt::Display for Device {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Device::Cpu { .. } => write!(f, "cpu"),
            Device::Cuda { ordinal } => write!(f, "cuda:{ordinal}"),
        }
    }
}

/// One kernel call on a device's timeline (`aicf train --profile`).
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct TraceEvent {
    /// The function the call belongs to (`train_step`).
    pub function: String,
    /// Its position in the function.
    pub call: usize,
    /// The kernel's symbol.
    pub kernel: String,
    /// The `ll` op it implements.
    pub op: String,
    /// Where its `hl` op is written.
    pub origin: Option<String>,
    /// The schedule's stream (0 on the CPU, which runs one).
    pub stream: u32,
    /// Microseconds since the backend started recording, and the call's
    /// duration.
    pub start_us: f64,
    pub duration_us: f64,
}

/// A compiled model's state and the modules that run on it, on one device.
pub trait Backend {
    /// What runs the model (`cpu, 2 threads`, `cuda:0 NVIDIA H100 80GB HBM3 (sm_90)`).
    fn device(&self) -> String;

    /// The manifest of the artifact the backend was opened with.
    fn manifest(&self) -> &Manifest;

    /// Loads `dir`, the same model compiled for other input shapes, to run
    /// on this backend's parameters and state. Its symbol table and IR hash
    /// must be this model's.
    fn add_variant(&mut self, dir: &Path) -> Result<()>;

    /// Whether a module of this backend runs `function` on inputs of these
    /// shapes and types.
    fn compiled_for(&self, function: &str, inputs: &[&Tensor]) -> bool;

    /// Calls `function` with its inputs in signature order; returns its
    /// outputs (the loss, results) in signature order. Parameters and state
    /// are read and updated in place.
    fn call(&mut self, function: &str, inputs: &[&Tensor]) -> Result<Vec<Tensor>>;

    /// Calls `function` on each batch in turn; returns each call's outputs.
    /// A GPU copies batch i + 1 while call i computes.
    fn call_each(&mut self, function: &str, batches: &[Vec<Tensor>]) -> Result<Vec<Vec<Tensor>>> {
        batches.iter().map(|b| self.call(function, &b.iter().collect::<Vec<_>>())).collect()
    }

    /// Calls `function` on `inputs` (see [`Backend::call`]) and, where the
    /// device computes asynchronously, starts copying `next` (the next
    /// call's inputs) while it computes: a GPU's next call on exactly those
    /// inputs then finds them on the device. Other backends just call.
    fn call_staging_next(
        &mut self,
        function: &str,
        inputs: &[&Tensor],
        next: Option<&[&Tensor]>,
    ) -> Result<Vec<Tensor>> {
        let _ = next;
        self.call(function, inputs)
    }

    /// Makes this backend one replica of a data-parallel run: the
    /// collectives of its modules (`ll.all_reduce`) sum over `comm`'s
    /// replicas. Without one they sum over this replica alone.
    fn set_communicator(&mut self, comm: std::sync::Arc<dyn crate::collective::Communicator>) -> Result<()>;

    /// A parameter or state symbol's bytes (little-endian elements).
    fn symbol_bytes(&self, name: &str) -> Option<Vec<u8>>;

    /// Replaces a symbol's bytes (exactly its size).
    fn set_symbol_bytes(&mut self, name: &str, bytes: &[u8]) -> Result<()>;

    /// Starts (or stops) recording every kernel call's time; see
    /// [`Backend::take_trace`].
    fn set_profiling(&mut self, on: bool);

    /// The calls recorded since the last take, in the order they ran.
    fn take_trace(&mut self) -> Vec<TraceEvent>;

    /// Runs every GEMM that has library candidates with the one named
    /// (`generated`, or a backend's library: `library`, `library-swapped`,
    /// `gemm-rs`, `openblas`, `avx512`, `avx2`, `bf16-dot`, `mkl`, `mkl-bf16`
    /// on the CPU,
    /// `cublaslt` on CUDA) instead of the registry's
    /// measured choice; `None` goes back to the registry.
    fn force_gemm(&mut self, candidate: Option<&str>) -> Result<()>;

    /// How many GEMMs the candidate named has run so far, counted where its
    /// own code ran (a forced candidate that could not run a GEMM and fell
    /// back is not counted); `None` where the backend does not count.
    fn gemm_runs(&self, _candidate: &str) -> Option<usize> {
        None
    }

    /// Lets f32 GEMMs run in TF32 on a GPU's tensor cores (PyTorch's
    /// `allow_tf32`; off unless `AICF_ALLOW_TF32=1`). A CPU has no TF32:
    /// it ignores this.
    fn set_allow_tf32(&mut self, _on: bool) {}

    /// The GEMM candidates this session ran (registry key -> candidate),
    /// with what the machine knows for the same target: checkpoints record
    /// them.
    fn gemm_choices(&self) -> BTreeMap<String, String>;

    /// Runs `choices` (as [`Backend::gemm_choices`] gives them) ahead of
    /// the machine's registry: a resumed run replays the kernels it ran.
    fn pin_gemm_choices(&mut self, choices: &BTreeMap<String, String>);

    /// The current value of a parameter or state symbol.
    fn symbol(&self, name: &str) -> Option<Tensor> {
        let s = self.manifest().symbols.iter().find(|s| s.name == name)?;
        let bytes = self.symbol_bytes(name)?;
        Some(Tensor::new(s.shape.clone(), s.dtype, read_values(&bytes, s.dtype)))
    }

    /// Replaces a symbol's value (same shape).
    fn set_symbol(&mut self, name: &str, value: &Tensor) -> Result<()> {
        let err = |m: String| RuntimeError::Arguments { function: format!("set {name}"), message: m };
        let s = self.manifest().symbols.iter().find(|s| s.name == name).ok_or_else(|| err("no such symbol".into()))?;
        if s.shape != value.shape {
            return Err(err(format!("shape {:?}, expected {:?}", value.shape, s.shape)));
        }
        if value.values.len() != s.shape.iter().product::<usize>() {
            return Err(err(format!("{} values for shape {:?}", value.values.len(), s.shape)));
        }
        // As strict as a call's inputs: an integer tensor for a float
        // symbol (or the other way), a step count of 2.5, or a NaN was set
        // and written as whatever its bytes became. A parameter or state is
        // finite, as a checkpoint's are (an infinity, or 1e40 stored as one
        // in f32, was set, and the next save_checkpoint blamed training).
        use crate::artifact::DType;
        let float = |d: DType| matches!(d, DType::F32 | DType::F64 | DType::F16 | DType::BF16);
        if float(s.dtype) != float(value.dtype) {
            return Err(err(format!("a {:?} tensor, the symbol is {:?}", value.dtype, s.dtype)));
        }
        let bad = if float(s.dtype) {
            let most = s.dtype.largest_float().unwrap_or(f64::MAX);
            value.values.iter().position(|v| !(v.is_finite() && v.abs() <= most))
        } else {
            value.values.iter().position(|v| !(v.is_finite() && v.fract() == 0.0))
        };
        if let Some(at) = bad {
            return Err(err(format!(
                "{} at index {at} is not a value a {:?} symbol holds (a finite number in its range); nothing was set",
                value.values[at], s.dtype
            )));
        }
        let mut bytes = vec![0u8; value.values.len() * s.dtype.bytes()];
        write_values(&mut bytes, s.dtype, &value.values);
        self.set_symbol_bytes(name, &bytes)
    }

    /// Every parameter and state symbol's value, by name.
    /// Every parameter and state symbol's value (gradient accumulators,
    /// a step's scratch, left out).
    fn symbols(&self) -> BTreeMap<String, Tensor> {
        self.manifest()
            .symbols
            .iter()
            .filter(|s| !s.is_accumulator())
            .filter_map(|s| Some((s.name.clone(), self.symbol(&s.name)?)))
            .collect()
    }

    fn function(&self, name: &str) -> Result<&Function> {
        self.manifest().functions.iter().find(|f| f.name == name).ok_or_else(|| RuntimeError::NoFunction(name.into()))
    }

    /// Saves every parameter and state symbol with `metadata` (plus the IR
    /// hash) to `path`, atomically.
    fn save_checkpoint(&self, path: &Path, metadata: &BTreeMap<String, String>) -> Result<()> {
        self.save_checkpoint_with(path, metadata, Vec::new())
    }

    /// [`Backend::save_checkpoint`] with `extra` entries beside the
    /// symbols (names outside the model's, such as `aicf.kept/...`), which
    /// [`Backend::load_checkpoint`] ignores.
    fn save_checkpoint_with(&self, path: &Path, metadata: &BTreeMap<String, String>, extra: Vec<Entry>) -> Result<()> {
        let mut entries = self
            .manifest()
            .symbols
            .iter()
            .filter(|s| !s.is_accumulator())
            .map(|s| {
                let bytes = self.symbol_bytes(&s.name).ok_or_else(|| RuntimeError::Arguments {
                    function: "save_checkpoint".into(),
                    message: format!("no value for symbol {}", s.name),
                })?;
                Ok(Entry { name: s.name.clone(), dtype: s.dtype, shape: s.shape.clone(), bytes })
            })
            .collect::<Result<Vec<_>>>()?;
        // A NaN or an infinity is not saved: loading refuses it as damage
        // (a program that trained on NaN data saved a checkpoint that then
        // did not load). The file at `path` is left as it was.
        for e in &entries {
            if let Some(at) = first_non_finite(e.dtype, &e.bytes) {
                return Err(RuntimeError::Arguments {
                    function: "save_checkpoint".into(),
                    message: format!(
                        "{}: not saved: {} holds a NaN or an infinity (element {at}), which no checkpoint loads \
                         (training went wrong: the inputs or the learning rate)",
                        path.display(),
                        e.name
                    ),
                });
            }
        }
        entries.extend(extra);
        let mut metadata = metadata.clone();
        metadata.insert("aicf.ir_hash".into(), self.manifest().ir_hash.clone());
        let choices = self.gemm_choices();
        if !choices.is_empty() {
            let text = serde_json::to_string(&choices).unwrap_or_default();
            metadata.insert(GEMM_CHOICES.into(), text);
        }
        Ok(checkpoint::save(path, &entries, &metadata)?)
    }

    /// Restores every symbol from `path`, which must come from this model
    /// (same IR hash, every symbol present with its shape and type);
    /// returns the checkpoint's metadata. Nothing changes when it fails.
    fn load_checkpoint(&mut self, path: &Path) -> Result<BTreeMap<String, String>> {
        self.load_checkpoint_of(path, true, true)
    }

    /// [`Backend::load_checkpoint`], where `same_ir` asks for the model's
    /// IR hash; without it, a checkpoint of the same symbols from the model
    /// at another batch size (an ONNX model imported again at the batch a
    /// command needs), every symbol still checked. Without `state`, the
    /// optimizer's state may be missing (kept as it is: what evaluation
    /// reads is the parameters), a checkpoint's weights alone.
    fn load_checkpoint_of(&mut self, path: &Path, same_ir: bool, state: bool) -> Result<BTreeMap<String, String>> {
        let (entries, metadata) = checkpoint::load(path)?;
        let p = path.display().to_string();
        let expected = self.manifest().ir_hash.clone();
        let Some(found) = metadata.get("aicf.ir_hash").cloned() else {
            // Weights saved by other means (safetensors.torch.save_file):
            // no record of the model they are of, said as such.
            return Err(CheckpointError::Io {
                path: p,
                message: "holds no record of its model (no aicf.ir_hash in its metadata): not a checkpoint AICF \
                          wrote (`aicf train --checkpoint-dir`, `Trainer::save_checkpoint`)"
                    .into(),
            }
            .into());
        };
        if same_ir && found != expected {
            return Err(CheckpointError::OtherModel { path: p, found, expected }.into());
        }
        let params: std::collections::HashSet<&str> =
            self.manifest().symbols.iter().filter(|q| q.kind == "param").map(|q| q.name.as_str()).collect();
        // Another optimizer's state, where the train step's optimizer keeps
        // none of that kind (Adam's moments for SGD): refused as the
        // reverse is (they were dropped without a word, while SGD's
        // momentum for Adam was refused).
        if state
            && let Some(other) = entries.keys().find(|name| {
                name.rsplit_once('.')
                    .is_some_and(|(param, slot)| params.contains(param) && OPTIMIZER_SLOTS.contains(&slot))
                    && !self.manifest().symbols.iter().any(|q| &q.name == *name)
            })
        {
            return Err(CheckpointError::Mismatch {
                path: p,
                message: format!(
                    "it holds optimizer state {other}, which this train step's optimizer does not keep (saved with \
                     another optimizer?); {FRESH_OPTIMIZER}"
                ),
            }
            .into());
        }
        for s in &self.manifest().symbols {
            // A checkpoint of an fp32 or bf16 run continues in fp16 from the
            // initial loss scale.
            if (LOSS_SCALING.contains(&s.name.as_str()) || s.is_accumulator()) && !entries.contains_key(&s.name) {
                continue;
            }
            // An optimizer's slot is named for its parameter
            // (`fc1.weight.exp_avg`); other state is the model's own (a
            // batch norm's running statistics), which evaluation reads.
            let slot = s.kind == "state" && s.name.rmatch_indices('.').any(|(at, _)| params.contains(&s.name[..at]));
            if !state && slot && !entries.contains_key(&s.name) {
                continue;
            }
            let e = entries.get(&s.name).ok_or_else(|| CheckpointError::Mismatch {
                path: p.clone(),
                message: match (s.kind.as_str(), slot) {
                    ("param", _) => format!("it has no parameter {} (a checkpoint of another model?)", s.name),
                    (_, true) => format!(
                        "it has no optimizer state {} (saved with another optimizer?); {FRESH_OPTIMIZER}",
                        s.name
                    ),
                    _ => format!("it has no model state {} (a checkpoint of another model?)", s.name),
                },
            })?;
            if e.shape != s.shape || e.dtype != s.dtype {
                return Err(CheckpointError::Mismatch {
                    path: p.clone(),
                    message: format!(
                        "{} is {:?} {:?}, the model has {:?} {:?}",
                        s.name, e.dtype, e.shape, s.dtype, s.shape
                    ),
                }
                .into());
            }
            // A run never saves a NaN or an infinity (it stops on one and
            // keeps its last good checkpoint): one here is damage.
            if let Some(at) = first_non_finite(e.dtype, &e.bytes) {
                return Err(CheckpointError::Corrupt {
                    path: p.clone(),
                    message: format!("{} holds a NaN or an infinity (element {at})", s.name),
                }
                .into());
            }
        }
        let choices: Option<BTreeMap<String, String>> =
            match metadata.get(GEMM_CHOICES) {
                Some(text) => Some(serde_json::from_str(text).map_err(|e| CheckpointError::Corrupt {
                    path: p.clone(),
                    message: format!("{GEMM_CHOICES}: {e}"),
                })?),
                None => None,
            };
        let names: Vec<String> = self.manifest().symbols.iter().map(|s| s.name.clone()).collect();
        for name in names {
            if let Some(e) = entries.get(&name) {
                self.set_symbol_bytes(&name, &e.bytes)?;
            }
        }
        if let Some(choices) = choices {
            self.pin_gemm_choices(&choices);
        }
        Ok(metadata)
    }
}

/// The slots optimizers keep per parameter (`fc1.weight.exp_avg`): SGD's
/// momentum, Adam's moments.
pub const OPTIMIZER_SLOTS: [&str; 3] = ["momentum", "exp_avg", "exp_avg_sq"];

/// How to go on from a checkpoint of another optimizer's run, said where
/// its state does not fit.
const FRESH_OPTIMIZER: &str = "its parameters load with this optimizer's state started afresh by \
                               `Trainer::load_parameters` (`aicf train --resume --override-resume`; with the \
                               runtime alone, `load_checkpoint_of(path, true, false)`)";

/// The first element of `bytes` (little-endian values of `dtype`) that is
/// a NaN or an infinity; integers have none.
fn first_non_finite(dtype: crate::artifact::DType, bytes: &[u8]) -> Option<usize> {
    use crate::artifact::DType;
    let half = |mask: u16| bytes.chunks_exact(2).position(|b| u16::from_le_bytes([b[0], b[1]]) & mask == mask);
    match dtype {
        DType::F32 => bytes.chunks_exact(4).position(|b| !f32::from_le_bytes([b[0], b[1], b[2], b[3]]).is_finite()),
        DType::F64 => bytes
            .chunks_exact(8)
            .position(|b| !f64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]).is_finite()),
        // The exponent all ones.
        DType::BF16 => half(0x7f80),
        DType::F16 => half(0x7c00),
        DType::I32 | DType::I64 | DType::I1 | DType::U8 => None,
    }
}

/// fp16's loss-scaling states (`hl-optimizer{loss-scale}`): a checkpoint
/// without them (another precision's) leaves them at their initial values.
pub const LOSS_SCALING: [&str; 2] = ["loss_scale", "loss_scale.good_steps"];

/// The checkpoint metadata key of the GEMM choices a run made.
pub const GEMM_CHOICES: &str = "aicf.gemm";

/// Microseconds since the process first asked: the clock of every trace.
pub(crate) fn trace_clock_us() -> f64 {
    static EPOCH: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
    EPOCH.get_or_init(std::time::Instant::now).elapsed().as_secs_f64() * 1e6
}

/// The most CPU worker threads a run may ask for, per core.
pub const MAX_THREADS_PER_CORE: usize = 16;

/// Whether `device` can run here: the error says why not (too many CPU
/// threads, no CUDA driver, no such GPU). Cheap: call it before compiling
/// for the device.
pub fn check_device(device: &Device) -> Result<()> {
    match *device {
        Device::Cpu { threads } => {
            // More workers than this many per core only queue for the
            // cores (and thousands take minutes to start).
            let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
            let most = cores.saturating_mul(MAX_THREADS_PER_CORE);
            if threads > most {
                return Err(RuntimeError::Device {
                    device: device.to_string(),
                    message: format!(
                        "{threads} threads on {cores} core(s): at most {most} ({MAX_THREADS_PER_CORE} per core; 0 is one per core)"
                    ),
                });
            }
            Ok(())
        }
        Device::Cuda { ordinal } => {
            let fail = |message: String| RuntimeError::Device { device: device.to_string(), message };
            crate::cuda::available().map_err(fail)?;
            let count = crate::cuda::device_count().map_err(fail)?;
            if ordinal >= count {
                return Err(fail(format!("this machine has {count} GPU(s), numbered from 0")));
            }
            Ok(())
        }
    }
}

/// Opens the artifact in `dir` on `device`, parameters drawn from their
/// initializers with `seed` (the same numbers on every device).
pub fn open(dir: &Path, device: &Device, seed: u64) -> Result<Box<dyn Backend>> {
    check_device(device)?;
    match *device {
        Device::Cpu { threads } => {
            let module = crate::cpu::CpuModule::load(dir, threads)?;
            Ok(Box::new(crate::cpu::CpuSession::new(module, seed)?))
        }
        Device::Cuda { ordinal } => {
            let module = crate::cuda::CudaModule::load(dir, ordinal)?;
            Ok(Box::new(crate::cuda::CudaSession::new(module, seed)?))
        }
    }
}

/// Whether `variant` is the model `first` holds (same IR hash, symbol
/// table, train-step settings) compiled for other shapes.
pub(crate) fn check_variant(first: &Manifest, variant: &Manifest) -> Result<()> {
    let key = |m: &Manifest| -> Vec<(String, Vec<usize>, crate::artifact::DType)> {
        m.symbols.iter().map(|s| (s.name.clone(), s.shape.clone(), s.dtype)).collect()
    };
    if key(first) != key(variant) || first.ir_hash != variant.ir_hash {
        return Err(RuntimeError::Arguments {
            function: "add_variant".into(),
            message: "the variant is another model (its IR hash or symbol table differs)".into(),
        });
    }
    if first.settings != variant.settings {
        return Err(RuntimeError::Arguments {
            function: "add_variant".into(),
            message: "the variant's train step was compiled with other settings (optimizer, its hyper-parameters, \
                      precision, padding, accumulation or data parallelism): compile it with the model's flags, \
                      and --batch"
                .into(),
        });
    }
    if first.target != variant.target {
        return Err(RuntimeError::Arguments {
            function: "add_variant".into(),
            message: format!("the variant was compiled for '{}', the model for '{}'", variant.target, first.target),
        });
    }
    Ok(())
}

/// The error of a call no module was compiled for: what the first module
/// expects, and the input shapes the others were compiled for.
pub(crate) fn no_module_for(function: &str, manifests: &[&Manifest], first_problem: Option<String>) -> RuntimeError {
    let mut message = first_problem.unwrap_or_default();
    if manifests.len() > 1 {
        let shapes: Vec<String> = manifests
            .iter()
            .filter_map(|m| m.functions.iter().find(|f| f.name == function))
            .map(|f| {
                format!(
                    "{:?}",
                    f.args
                        .iter()
                        .filter(|a| a.role() == crate::artifact::Role::Input)
                        .map(|a| &a.shape)
                        .collect::<Vec<_>>()
                )
            })
            .collect();
        message.push_str(&format!(" (compiled for inputs {})", shapes.join(", ")));
    }
    RuntimeError::Arguments { function: function.into(), message }
}
