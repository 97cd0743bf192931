//! A compiled model with its state: parameters initialised from their
//! initializers, optimizer state at zero, one arena per function, and calls
//! by function name with the caller's inputs.

use crate::artifact::{DType, Role};
use crate::checkpoint::{self, CheckpointError, Entry};
use crate::cpu::{Bytes, CpuModule, Result, RuntimeError, read_values, write_values};
use crate::init::Init;
use std::collections::BTreeMap;
use std::collections::HashMap;
use std::path::Path;

/// One set of parameters and optimizer state, and the compiled modules that
/// run on it: the model as first compiled, plus variants of it compiled for
/// other input shapes (a smaller last batch). A call runs the module
/// compiled for its inputs' shapes.
pub struct Session {
    modules: Vec<CpuModule>,
    symbols: HashMap<String, Bytes>,
    /// Per (module, function).
    arenas: HashMap<(usize, String), Bytes>,
}

/// A host tensor: shape, element type and values.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Tensor {
    pub shape: Vec<usize>,
    pub dtype: DType,
    pub values: Vec<f64>,
}

impl Tensor {
    pub fn new(shape: impl Into<Vec<usize>>, dtype: DType, values: Vec<f64>) -> Self {
        Tensor { shape: shape.into(), dtype, values }
    }
    pub fn scalar(value: f64, dtype: DType) -> Self {
        Tensor { shape: vec![], dtype, values: vec![value] }
    }
}

impl Session {
    /// Parameters drawn from their initializers with `seed` (parameter `i`
    /// of the table uses stream `i`); state zeroed.
    pub fn new(module: CpuModule, seed: u64) -> Result<Self> {
        let symbols = initial_symbols(&module.manifest().symbols, seed)?;
        let mut session = Session { modules: Vec::new(), symbols, arenas: HashMap::new() };
        session.push(module);
        Ok(session)
    }

    fn push(&mut self, module: CpuModule) {
        let index = self.modules.len();
        for f in &module.manifest().functions {
            self.arenas.insert((index, f.name.clone()), Bytes::zeroed(f.arena_bytes as usize));
        }
        self.modules.push(module);
    }

    /// The module the session was created with.
    pub fn module(&self) -> &CpuModule {
        &self.modules[0]
    }

    /// The module the session was created with, to configure (profiling,
    /// a forced GEMM candidate).
    pub fn module_mut(&mut self) -> &mut CpuModule {
        &mut self.modules[0]
    }

    /// Adds `module`, the same model compiled for other input shapes, to run
    /// on this session's parameters and state. Its symbol table must be this
    /// model's: same names, shapes and types, in the same order.
    pub fn add_variant(&mut self, module: CpuModule) -> Result<()> {
        let key = |m: &CpuModule| -> Vec<(String, Vec<usize>, DType)> {
            m.manifest().symbols.iter().map(|s| (s.name.clone(), s.shape.clone(), s.dtype)).collect()
        };
        if key(&module) != key(self.module()) || module.manifest().ir_hash != self.module().manifest().ir_hash {
            return Err(RuntimeError::Arguments {
                function: "add_variant".into(),
                message: "the variant is another model (its IR hash or symbol table differs)".into(),
            });
        }
        self.push(module);
        Ok(())
    }

    /// Whether a module of this session runs `function` on inputs of these
    /// shapes and types.
    pub fn compiled_for(&self, function: &str, inputs: &[&Tensor]) -> bool {
        self.modules.iter().any(|m| m.function(function).is_ok_and(|f| input_mismatch(f, inputs).is_none()))
    }

    /// The current value of a parameter or state symbol.
    pub fn symbol(&self, name: &str) -> Option<Tensor> {
        let s = self.module().manifest().symbols.iter().find(|s| s.name == name)?;
        let b = self.symbols.get(name)?;
        Some(Tensor::new(s.shape.clone(), s.dtype, read_values(b.as_bytes(), s.dtype)))
    }

    /// Replaces a symbol's value (same shape).
    pub fn set_symbol(&mut self, name: &str, value: &Tensor) -> Result<()> {
        let err = |m: String| RuntimeError::Arguments { function: format!("set {name}"), message: m };
        let s = self.modules[0]
            .manifest()
            .symbols
            .iter()
            .find(|s| s.name == name)
            .ok_or_else(|| err("no such symbol".into()))?;
        if s.shape != value.shape {
            return Err(err(format!("shape {:?}, expected {:?}", value.shape, s.shape)));
        }
        let b = self.symbols.get_mut(name).ok_or_else(|| err("no buffer".into()))?;
        write_values(b.as_bytes_mut(), s.dtype, &value.values);
        Ok(())
    }

    /// Calls `function` with its inputs in signature order; returns its
    /// outputs (the loss, results) in signature order. Parameters and state
    /// are read and updated in place.
    ///
    /// The module is the first one compiled for the inputs' shapes (see
    /// [`Session::add_variant`]); with none, the error names what the first
    /// module expects and the shapes the others were compiled for.
    pub fn call(&mut self, function: &str, inputs: &[&Tensor]) -> Result<Vec<Tensor>> {
        let bad = |message: String| RuntimeError::Arguments { function: function.into(), message };
        let mut chosen = None;
        let mut first_problem = None;
        for (i, m) in self.modules.iter().enumerate() {
            let Ok(f) = m.function(function) else { continue };
            match input_mismatch(f, inputs) {
                None => {
                    chosen = Some(i);
                    break;
                }
                Some(problem) => {
                    first_problem.get_or_insert(problem);
                }
            }
        }
        let Some(index) = chosen else {
            self.module().function(function)?;
            let mut message = first_problem.unwrap_or_default();
            if self.modules.len() > 1 {
                let shapes: Vec<String> = self
                    .modules
                    .iter()
                    .filter_map(|m| m.function(function).ok())
                    .map(|f| {
                        format!(
                            "{:?}",
                            f.args.iter().filter(|a| a.role() == Role::Input).map(|a| &a.shape).collect::<Vec<_>>()
                        )
                    })
                    .collect();
                message.push_str(&format!(" (compiled for inputs {})", shapes.join(", ")));
            }
            return Err(bad(message));
        };
        let f = self.modules[index].function(function)?.clone();
        let mut buffers: Vec<Bytes> = Vec::with_capacity(f.args.len());
        let mut next_input = 0;
        for a in &f.args {
            let b = match a.role() {
                Role::Input => {
                    let t = inputs[next_input];
                    next_input += 1;
                    let mut b = Bytes::zeroed(a.bytes());
                    write_values(b.as_bytes_mut(), a.dtype, &t.values);
                    b
                }
                Role::Output => Bytes::zeroed(a.bytes()),
                Role::Symbol(s) => self.symbols.remove(&s).ok_or_else(|| bad(format!("no buffer for symbol @{s}")))?,
                Role::Arena => self.arenas.remove(&(index, function.to_string())).unwrap_or_default(),
            };
            buffers.push(b);
        }
        let mut refs: Vec<&mut Bytes> = buffers.iter_mut().collect();
        let result = self.modules[index].run(function, &mut refs);
        // Give the symbols and the arena back, whatever happened.
        let mut outputs = Vec::new();
        for (a, b) in f.args.iter().zip(buffers) {
            match a.role() {
                Role::Symbol(s) => {
                    self.symbols.insert(s, b);
                }
                Role::Arena => {
                    self.arenas.insert((index, function.to_string()), b);
                }
                Role::Output => outputs.push(Tensor::new(a.shape.clone(), a.dtype, read_values(b.as_bytes(), a.dtype))),
                Role::Input => {}
            }
        }
        result.map(|_| outputs)
    }

    /// Saves every parameter and state symbol with `metadata` (plus the IR
    /// hash) to `path`, atomically.
    pub fn save_checkpoint(&self, path: &Path, metadata: &BTreeMap<String, String>) -> Result<(), CheckpointError> {
        let entries: Vec<Entry> = self
            .module()
            .manifest()
            .symbols
            .iter()
            .map(|s| Entry {
                name: s.name.clone(),
                dtype: s.dtype,
                shape: s.shape.clone(),
                bytes: self.symbols.get(&s.name).map(|b| b.as_bytes().to_vec()).unwrap_or_default(),
            })
            .collect();
        let mut metadata = metadata.clone();
        metadata.insert("aicf.ir_hash".into(), self.module().manifest().ir_hash.clone());
        checkpoint::save(path, &entries, &metadata)
    }

    /// Restores every symbol from `path` (which must come from this model:
    /// same IR hash, every symbol present with its shape); returns the
    /// checkpoint's metadata. Nothing changes when it fails.
    pub fn load_checkpoint(&mut self, path: &Path) -> Result<BTreeMap<String, String>, CheckpointError> {
        let (entries, metadata) = checkpoint::load(path)?;
        let p = path.display().to_string();
        // The IR hash is of the model; the optimizer's state is checked by
        // name and shape below.
        let expected = self.module().manifest().ir_hash.clone();
        let found = metadata.get("aicf.ir_hash").cloned().unwrap_or_else(|| "none".into());
        if found != expected {
            return Err(CheckpointError::OtherModel { path: p, found, expected });
        }
        for s in &self.module().manifest().symbols {
            let e = entries.get(&s.name).ok_or_else(|| CheckpointError::Mismatch {
                path: p.clone(),
                message: format!("it has no {} (saved with another optimizer?)", s.name),
            })?;
            if e.shape != s.shape || e.dtype != s.dtype {
                return Err(CheckpointError::Mismatch {
                    path: p.clone(),
                    message: format!(
                        "{} is {:?} {:?}, the model has {:?} {:?}",
                        s.name, e.dtype, e.shape, s.dtype, s.shape
                    ),
                });
            }
        }
        for (name, b) in self.symbols.iter_mut() {
            if let Some(e) = entries.get(name) {
                b.as_bytes_mut().copy_from_slice(&e.bytes);
            }
        }
        Ok(metadata)
    }
}

/// Every symbol's starting value: parameters drawn from their
/// initializers with `seed` (parameter `i` of the table uses stream `i`),
/// state zeroed. The CPU and CUDA sessions start from the same numbers.
pub(crate) fn initial_symbols(table: &[crate::artifact::Symbol], seed: u64) -> Result<HashMap<String, Bytes>> {
    let mut symbols = HashMap::new();
    let mut stream = 0;
    for s in table {
        let n: usize = s.shape.iter().product();
        let mut b = Bytes::zeroed(n * s.dtype.bytes());
        if let Some(spec) = &s.init {
            let err = |m: String| RuntimeError::Arguments { function: format!("init of {}", s.name), message: m };
            let init = Init::parse(spec).map_err(|e| err(e.to_string()))?;
            let mut values = vec![0f32; n];
            init.fill(&s.shape, seed, stream, &mut values).map_err(|e| err(e.to_string()))?;
            stream += 1;
            write_values(b.as_bytes_mut(), s.dtype, &values.iter().map(|&v| v as f64).collect::<Vec<_>>());
        }
        symbols.insert(s.name.clone(), b);
    }
    Ok(symbols)
}

/// Why `inputs` do not fit `f`'s inputs (count, shape or type), if they do not.
pub(crate) fn input_mismatch(f: &crate::artifact::Function, inputs: &[&Tensor]) -> Option<String> {
    let expected: Vec<_> = f.args.iter().filter(|a| a.role() == Role::Input).collect();
    if expected.len() != inputs.len() {
        return Some(format!("{} inputs given, the function takes {}", inputs.len(), expected.len()));
    }
    expected.iter().zip(inputs).enumerate().find(|(_, (a, t))| t.shape != a.shape || t.dtype != a.dtype).map(
        |(i, (a, t))| {
            format!(
                "input #{i} ({}) is {:?} {:?}, the model expects {:?} {:?}",
                a.bind, t.dtype, t.shape, a.dtype, a.shape
            )
        },
    )
}
