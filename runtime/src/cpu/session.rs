//! The CPU backend's session: one model's parameters and optimizer state
//! in host memory, one arena that every function of every module runs in
//! (calls run one at a time, and an arena holds a call's scratch alone),
//! and the modules that run on them (the model as first compiled, and
//! variants of it compiled for other input shapes).

use super::CpuModule;
use crate::artifact::{Manifest, Role};
use crate::backend::{Backend, TraceEvent, check_variant, no_module_for};
use crate::collective::Communicator;
use crate::error::{Result, RuntimeError};
use crate::host::{Bytes, Tensor, initial_symbols, input_mismatch, read_values};
use crate::registry::Choice;
use std::collections::HashMap;
use std::path::Path;

pub struct CpuSession {
    modules: Vec<CpuModule>,
    symbols: HashMap<String, Bytes>,
    /// The arena of every function of every module, as large as the
    /// largest: a call's scratch, nothing kept between calls. (One per
    /// function held them all resident, and a train run's memory was the
    /// sum of `@forward`'s, `@loss`'s, `@loss_grad`'s and `@train_step`'s,
    /// for each batch size: two to three times its step's.)
    arena: Bytes,
    /// GEMM choices a checkpoint gave (each module added later runs them).
    pins: std::collections::BTreeMap<String, String>,
    /// The candidate every GEMM runs with, when forced (modules added
    /// later too).
    forced: Option<Choice>,
    /// The replicas of a data-parallel run, which the modules' collectives
    /// sum over.
    comm: Option<std::sync::Arc<dyn Communicator>>,
}

impl CpuSession {
    /// Parameters drawn from their initializers with `seed` (parameter `i`
    /// of the table uses stream `i`); state zeroed.
    pub fn new(module: CpuModule, seed: u64) -> Result<Self> {
        let symbols = initial_symbols(&module.manifest().symbols, seed, module.weights.as_deref())?;
        let mut session = CpuSession {
            modules: Vec::new(),
            symbols,
            arena: Bytes::default(),
            pins: Default::default(),
            forced: None,
            comm: None,
        };
        session.push(module)?;
        Ok(session)
    }

    /// Adds `module` with its functions' arenas, refusing arenas the machine
    /// does not have the memory for.
    fn push(&mut self, module: CpuModule) -> Result<()> {
        let index = self.modules.len();
        let functions = &module.manifest().functions;
        let need = functions.iter().map(|f| f.arena_bytes).max().unwrap_or(0);
        // Arenas past the machine's memory are named by their largest
        // tensor: the kernel that writes it and where its op is written
        // (the error named no op and no file).
        let largest = functions
            .iter()
            .flat_map(|f| &f.calls)
            .flat_map(|c| {
                c.buffers
                    .iter()
                    .zip(&c.bytes)
                    .filter(|(b, _)| matches!(b, crate::artifact::Buffer::Arena { .. }))
                    .map(move |(_, &bytes)| (bytes, c))
            })
            .max_by_key(|(bytes, _)| *bytes);
        let widest = functions.iter().max_by_key(|f| f.arena_bytes).map_or("", |f| f.name.as_str());
        let what = match largest {
            Some((bytes, c)) if bytes > 0 => format!(
                "the arena of @{widest}, the largest of {} functions' (the largest tensor in them, {}, is read or \
                 written by '{}'{}; a smaller --batch or a --memory-budget shrinks activations)",
                functions.len(),
                crate::error::human_bytes(bytes),
                c.op,
                c.origin.as_deref().map_or(String::new(), |o| format!(" of {o}"))
            ),
            _ => format!("the arena of @{widest}"),
        };
        if need as usize > self.arena.capacity() {
            crate::host::check_memory(&what, need)?;
            // (The smaller one is let go first: the two are never both held.
            // Where the larger is refused, the smaller is had again, so the
            // modules already added still run.)
            let before = self.arena.capacity();
            self.arena = Bytes::default();
            match Bytes::try_zeroed(need as usize, &format!("the arena of @{widest}")) {
                Ok(arena) => self.arena = arena,
                Err(e) => {
                    if let Ok(arena) = Bytes::try_zeroed(before, "the arena") {
                        self.arena = arena;
                    }
                    return Err(e);
                }
            }
        }
        module.registry().pin(&self.pins);
        let mut module = module;
        // The session's forced candidate, where one is set, runs every
        // module's GEMMs; a first module forced before the session was made
        // keeps its choice and makes it the session's (it was reset to the
        // registry's choices: the tests that force a candidate on a module
        // then ran whatever the registry had measured).
        match (self.forced, index) {
            (Some(_), _) => module.force_gemm(self.forced),
            (None, 0) => self.forced = module.forced,
            (None, _) => module.force_gemm(None),
        }
        self.modules.push(module);
        Ok(())
    }

    /// The bytes of the one arena every function runs in: the largest
    /// function's of every module.
    pub fn arena_bytes(&self) -> usize {
        self.arena.capacity()
    }

    /// The module the session was created with.
    pub fn module(&self) -> &CpuModule {
        &self.modules[0]
    }

    /// Adds `module`, the same model compiled for other input shapes.
    pub fn add_module(&mut self, module: CpuModule) -> Result<()> {
        check_variant(self.module().manifest(), module.manifest())?;
        self.push(module)
    }
}

impl Backend for CpuSession {
    fn device(&self) -> String {
        let threads = self.module().threads();
        format!("cpu, {threads} thread{}", if threads == 1 { "" } else { "s" })
    }

    fn manifest(&self) -> &Manifest {
        self.module().manifest()
    }

    fn add_variant(&mut self, dir: &Path) -> Result<()> {
        let module = CpuModule::load(dir, self.module().threads())?;
        self.add_module(module)
    }

    fn compiled_for(&self, function: &str, inputs: &[&Tensor]) -> bool {
        self.modules.iter().any(|m| m.function(function).is_ok_and(|f| input_mismatch(f, inputs).is_none()))
    }

    /// The module is the first one compiled for the inputs' shapes; with
    /// none, the error names what the first module expects and the shapes
    /// the others were compiled for.
    fn call(&mut self, function: &str, inputs: &[&Tensor]) -> Result<Vec<Tensor>> {
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
            let manifests: Vec<&Manifest> = self.modules.iter().map(|m| m.manifest()).collect();
            return Err(no_module_for(function, &manifests, first_problem));
        };
        let f = self.modules[index].function(function)?.clone();
        crate::host::check_integer_inputs(&f, inputs).map_err(bad)?;
        // First what can fail (the call's own buffers, the symbols' presence),
        // then the session's symbols and arena are taken: an error never
        // leaves the session without them.
        let mut own: Vec<Option<Bytes>> = Vec::with_capacity(f.args.len());
        let mut next_input = 0;
        for a in &f.args {
            own.push(match a.role() {
                Role::Input => {
                    let t = inputs[next_input];
                    next_input += 1;
                    let mut b = Bytes::try_zeroed(a.bytes(), &format!("@{function}'s input {}", a.bind))?;
                    crate::host::write_values(b.as_bytes_mut(), a.dtype, &t.values);
                    Some(b)
                }
                Role::Output => Some(Bytes::try_zeroed(a.bytes(), &format!("@{function}'s {}", a.bind))?),
                Role::Symbol(s) if !self.symbols.contains_key(&s) => {
                    return Err(bad(format!("no buffer for symbol @{s}")));
                }
                Role::Symbol(_) | Role::Arena => None,
            });
        }
        let buffers: Vec<Bytes> = f
            .args
            .iter()
            .zip(own)
            .map(|(a, b)| match (a.role(), b) {
                (_, Some(b)) => b,
                (Role::Symbol(s), None) => self.symbols.remove(&s).unwrap_or_default(),
                (_, None) => {
                    let mut arena = std::mem::take(&mut self.arena);
                    // (Room for the largest function's: any fits. One that
                    // does not, after a refused growth, is left at its room,
                    // and the call's size check names it.)
                    arena.set_len(f.arena_bytes as usize);
                    arena
                }
            })
            .collect();
        let mut buffers = buffers;
        let mut refs: Vec<&mut Bytes> = buffers.iter_mut().collect();
        let result = self.modules[index].run_with(function, &mut refs, self.comm.as_deref());
        // Give the symbols and the arena back, whatever happened.
        let mut outputs = Vec::new();
        for (a, b) in f.args.iter().zip(buffers) {
            match a.role() {
                Role::Symbol(s) => {
                    self.symbols.insert(s, b);
                }
                Role::Arena => {
                    let mut b = b;
                    let room = b.capacity();
                    b.set_len(room);
                    self.arena = b;
                }
                Role::Output => outputs.push(Tensor::new(a.shape.clone(), a.dtype, read_values(b.as_bytes(), a.dtype))),
                Role::Input => {}
            }
        }
        result.map(|_| outputs)
    }

    fn set_communicator(&mut self, comm: std::sync::Arc<dyn Communicator>) -> Result<()> {
        self.comm = Some(comm);
        Ok(())
    }

    fn symbol_bytes(&self, name: &str) -> Option<Vec<u8>> {
        self.symbols.get(name).map(|b| b.as_bytes().to_vec())
    }

    fn set_symbol_bytes(&mut self, name: &str, bytes: &[u8]) -> Result<()> {
        let err = |m: String| RuntimeError::Arguments { function: format!("set {name}"), message: m };
        let b = self.symbols.get_mut(name).ok_or_else(|| err("no such symbol".into()))?;
        if b.len() != bytes.len() {
            return Err(err(format!("{} bytes, the symbol holds {}", bytes.len(), b.len())));
        }
        b.as_bytes_mut().copy_from_slice(bytes);
        Ok(())
    }

    fn set_profiling(&mut self, on: bool) {
        for m in &mut self.modules {
            m.set_profiling(on);
        }
    }

    fn take_trace(&mut self) -> Vec<TraceEvent> {
        let mut events: Vec<TraceEvent> = self.modules.iter().flat_map(|m| m.take_trace()).collect();
        events.sort_by(|a, b| a.start_us.total_cmp(&b.start_us));
        events
    }

    fn gemm_choices(&self) -> std::collections::BTreeMap<String, String> {
        let mut all = std::collections::BTreeMap::new();
        for m in &self.modules {
            all.extend(m.registry().choices());
        }
        all
    }

    fn pin_gemm_choices(&mut self, choices: &std::collections::BTreeMap<String, String>) {
        // (Recorded at another thread count: replayed at this one too.)
        let choices = &crate::registry::Registry::at_threads(choices, self.module().threads());
        self.pins.extend(choices.iter().map(|(k, v)| (k.clone(), v.clone())));
        for m in &self.modules {
            m.registry().pin(choices);
        }
    }

    fn gemm_runs(&self, candidate: &str) -> Option<usize> {
        let choice = Choice::from_name(candidate)?;
        Some(self.modules.iter().map(|m| m.gemm_runs(choice)).sum())
    }

    fn force_gemm(&mut self, candidate: Option<&str>) -> Result<()> {
        let choice = match candidate {
            None => None,
            Some(name) => Some(Choice::from_name(name).ok_or_else(|| RuntimeError::Arguments {
                function: "force_gemm".into(),
                message: format!(
                    "'{name}' is not a CPU GEMM candidate (generated, library, library-swapped, gemm-rs, openblas, avx512, avx2, bf16-dot, mkl, mkl-bf16)"
                ),
            })?),
        };
        self.forced = choice;
        for m in &mut self.modules {
            m.force_gemm(choice);
        }
        Ok(())
    }
}
