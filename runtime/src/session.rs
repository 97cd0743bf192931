//! A compiled model with its state: parameters initialised from their
//! initializers, optimizer state at zero, one arena per function, and calls
//! by function name with the caller's inputs.

use crate::artifact::{DType, Role};
use crate::checkpoint::{self, CheckpointError, Entry};
use std::collections::BTreeMap;
use std::path::Path;
use crate::cpu::{Bytes, CpuModule, Result, RuntimeError, read_values, write_values};
use crate::init::Init;
use std::collections::HashMap;

pub struct Session {
    module: CpuModule,
    symbols: HashMap<String, Bytes>,
    arenas: HashMap<String, Bytes>,
}

/// A host tensor: shape, element type and little-endian bytes.
#[derive(Clone, Debug, PartialEq)]
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
        let mut symbols = HashMap::new();
        let mut stream = 0;
        for s in &module.manifest().symbols {
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
        let arenas = module
            .manifest()
            .functions
            .iter()
            .map(|f| (f.name.clone(), Bytes::zeroed(f.arena_bytes as usize)))
            .collect();
        Ok(Session { module, symbols, arenas })
    }

    pub fn module(&self) -> &CpuModule {
        &self.module
    }

    /// The current value of a parameter or state symbol.
    pub fn symbol(&self, name: &str) -> Option<Tensor> {
        let s = self.module.manifest().symbols.iter().find(|s| s.name == name)?;
        let b = self.symbols.get(name)?;
        Some(Tensor::new(s.shape.clone(), s.dtype, read_values(b.as_bytes(), s.dtype)))
    }

    /// Replaces a symbol's value (same shape).
    pub fn set_symbol(&mut self, name: &str, value: &Tensor) -> Result<()> {
        let err = |m: String| RuntimeError::Arguments { function: format!("set {name}"), message: m };
        let s = self.module.manifest().symbols.iter().find(|s| s.name == name).ok_or_else(|| err("no such symbol".into()))?;
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
    pub fn call(&mut self, function: &str, inputs: &[&Tensor]) -> Result<Vec<Tensor>> {
        let f = self.module.function(function)?.clone();
        let bad = |message: String| RuntimeError::Arguments { function: function.into(), message };
        let mut buffers: Vec<Bytes> = Vec::with_capacity(f.args.len());
        let mut next_input = 0;
        for a in &f.args {
            let b = match a.role() {
                Role::Input => {
                    let t = inputs.get(next_input).ok_or_else(|| {
                        bad(format!("{} inputs given, the function takes more", inputs.len()))
                    })?;
                    next_input += 1;
                    if t.shape != a.shape || t.dtype != a.dtype {
                        return Err(bad(format!(
                            "input #{} ({}) is {:?} {:?}, the model expects {:?} {:?}",
                            next_input - 1,
                            a.bind,
                            t.dtype,
                            t.shape,
                            a.dtype,
                            a.shape
                        )));
                    }
                    let mut b = Bytes::zeroed(a.bytes());
                    write_values(b.as_bytes_mut(), a.dtype, &t.values);
                    b
                }
                Role::Output => Bytes::zeroed(a.bytes()),
                Role::Symbol(s) => {
                    self.symbols.remove(&s).ok_or_else(|| bad(format!("no buffer for symbol @{s}")))?
                }
                Role::Arena => self.arenas.remove(function).unwrap_or_default(),
            };
            buffers.push(b);
        }
        if next_input != inputs.len() {
            return Err(bad(format!("{} inputs given, the function takes {next_input}", inputs.len())));
        }
        let mut refs: Vec<&mut Bytes> = buffers.iter_mut().collect();
        let result = self.module.run(function, &mut refs);
        // Give the symbols and the arena back, whatever happened.
        let mut outputs = Vec::new();
        for (a, b) in f.args.iter().zip(buffers) {
            match a.role() {
                Role::Symbol(s) => {
                    self.symbols.insert(s, b);
                }
                Role::Arena => {
                    self.arenas.insert(function.to_string(), b);
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
            .module
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
        metadata.insert("aicf.ir_hash".into(), self.module.manifest().ir_hash.clone());
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
        let expected = self.module.manifest().ir_hash.clone();
        let found = metadata.get("aicf.ir_hash").cloned().unwrap_or_else(|| "none".into());
        if found != expected {
            return Err(CheckpointError::OtherModel { path: p, found, expected });
        }
        for s in &self.module.manifest().symbols {
            let e = entries.get(&s.name).ok_or_else(|| CheckpointError::Mismatch {
                path: p.clone(),
                message: format!("it has no {} (saved with another optimizer?)", s.name),
            })?;
            if e.shape != s.shape || e.dtype != s.dtype {
                return Err(CheckpointError::Mismatch {
                    path: p.clone(),
                    message: format!("{} is {:?} {:?}, the model has {:?} {:?}", s.name, e.dtype, e.shape, s.dtype, s.shape),
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
