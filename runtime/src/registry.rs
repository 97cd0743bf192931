//! The GEMM kernel registry: for each GEMM shape, the generated kernel or a
//! library one (matrixmultiply's sgemm, as C = AB or as C^T = B^T A^T, or
//! the `gemm` crate, each followed by the generated epilogue), whichever
//! measured fastest on this machine.
//! Candidates are timed from a cold cache (64 MiB written between runs), as
//! a GEMM meets its weights inside a train step. Decisions are cached on disk
//! (`$AICF_CACHE_DIR/gemm-registry.json`, default
//! `~/.cache/aicf/gemm-registry.json`), keyed by the shape, the compiled
//! target and the thread count, so a shape is measured once per machine.

use crate::artifact::{Call, GpuGemm, LibraryGemm};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Mutex;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Choice {
    Generated,
    /// sgemm computing C = A B
    Library,
    /// sgemm computing C^T = B^T A^T (written through C's strides)
    LibrarySwapped,
    /// the `gemm` crate, threaded on the runtime's pool
    GemmRs,
}

impl Choice {
    pub const ALL: [Choice; 4] = [Choice::Generated, Choice::Library, Choice::LibrarySwapped, Choice::GemmRs];

    /// The candidate named `name` ("generated", "library", "library-swapped",
    /// "gemm-rs").
    pub fn from_name(name: &str) -> Option<Choice> {
        Choice::ALL.into_iter().find(|c| c.name() == name)
    }

    pub fn name(self) -> &'static str {
        match self {
            Choice::Generated => "generated",
            Choice::Library => "library",
            Choice::LibrarySwapped => "library-swapped",
            Choice::GemmRs => "gemm-rs",
        }
    }
}

/// The version of the candidate set, part of every key: a decision measured
/// against older candidates (a slower generated kernel, say) is not reused.
/// v3: the gemm crate with its AVX-512 kernels; 16-bit GEMMs widened to f32
/// for the library candidates.
const CANDIDATES: &str = "v3";

/// AICF's per-machine cache: `$AICF_CACHE_DIR`, else `~/.cache/aicf`
/// (`None` without a home directory).
pub fn cache_dir() -> Option<PathBuf> {
    std::env::var_os("AICF_CACHE_DIR")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/aicf")))
}

/// A GEMM's shape and operand layouts, as the keys write them.
fn shape(g: &LibraryGemm) -> String {
    format!("batch {} m {} n {} k {} a {:?} b {:?}", g.batch, g.m, g.n, g.k, g.a_strides, g.b_strides)
}

pub struct Registry {
    path: Option<PathBuf>,
    decisions: Mutex<BTreeMap<String, String>>,
    /// The choices this session ran (or was given by a checkpoint, which
    /// win over the machine's): what a checkpoint records, so that a resume
    /// on another machine or a fresh cache runs the same kernels and
    /// reaches the same bits.
    session: Mutex<BTreeMap<String, String>>,
}

impl Registry {
    /// Loads the cache file (an unreadable or corrupt one is ignored and
    /// rewritten).
    pub fn open() -> Self {
        let path = cache_dir().map(|d| d.join("gemm-registry.json"));
        let decisions = path
            .as_ref()
            .and_then(|p| std::fs::read_to_string(p).ok())
            .and_then(|t| serde_json::from_str(&t).ok())
            .unwrap_or_default();
        Registry { path, decisions: Mutex::new(decisions), session: Mutex::default() }
    }

    /// Makes `choices` (key -> candidate name, as [`Registry::choices`]
    /// returns them) this session's, ahead of the machine's decisions.
    pub fn pin(&self, choices: &BTreeMap<String, String>) {
        if let Ok(mut s) = self.session.lock() {
            s.extend(choices.iter().map(|(k, v)| (k.clone(), v.clone())));
        }
    }

    /// The choices this session ran, and every decision the machine holds
    /// for the same target and thread count (a model that grows meets
    /// them next): what a checkpoint records.
    pub fn choices(&self) -> BTreeMap<String, String> {
        let mut out = self.session.lock().map(|s| s.clone()).unwrap_or_default();
        let prefix = |k: &str| k.split_once(": ").map(|(p, _)| p.to_string());
        let prefixes: std::collections::BTreeSet<String> = out.keys().filter_map(|k| prefix(k)).collect();
        if let Ok(d) = self.decisions.lock() {
            for (k, v) in d.iter() {
                if !k.ends_with(" (ms)") && prefix(k).is_some_and(|p| prefixes.contains(&p)) {
                    out.entry(k.clone()).or_insert_with(|| v.clone());
                }
            }
        }
        out
    }

    pub fn key(g: &LibraryGemm, call: &Call, target: &str, threads: usize) -> String {
        let epilogue = call.library.as_ref().and_then(|l| l.epilogue.as_ref()).is_some();
        format!("{CANDIDATES}/{target}/t{threads}: {} epilogue {epilogue}", shape(g))
    }

    /// The key of a GPU GEMM's decision (generated kernel or cuBLASLt) on
    /// the GPU named `device`.
    pub fn gpu_key(g: &LibraryGemm, gpu: &GpuGemm, device: &str) -> String {
        format!("cuda/{device}/{CANDIDATES}: {} {gpu:?}", shape(g))
    }

    pub fn get(&self, key: &str) -> Option<Choice> {
        Choice::from_name(&self.get_named(key)?)
    }

    /// The candidate recorded for `key`, by name (any backend's).
    pub fn get_named(&self, key: &str) -> Option<String> {
        let mut session = self.session.lock().ok()?;
        if let Some(c) = session.get(key) {
            return Some(c.clone());
        }
        let c = self.decisions.lock().ok()?.get(key).cloned()?;
        session.insert(key.to_string(), c.clone());
        Some(c)
    }

    /// Records a measured decision (and the times behind it) and writes the
    /// cache atomically.
    pub fn set(&self, key: String, choice: Choice, times: &[(Choice, f64)]) {
        let named: Vec<(&str, f64)> = times.iter().map(|(c, ms)| (c.name(), *ms)).collect();
        self.set_named(key, choice.name(), &named);
    }

    /// [`Registry::set`] with candidates by name. The file is merged, not
    /// overwritten: under a lock, the decisions other processes (or other
    /// modules of this one, such as a batch-size variant) wrote since this
    /// registry was opened are read back and kept beside this one.
    pub fn set_named(&self, key: String, choice: &str, times: &[(&str, f64)]) {
        if let Ok(mut s) = self.session.lock() {
            s.insert(key.clone(), choice.to_string());
        }
        let Ok(mut d) = self.decisions.lock() else { return };
        d.insert(key.clone(), choice.into());
        let detail: Vec<String> = times.iter().map(|(c, ms)| format!("{c} {ms:.4}")).collect();
        d.insert(format!("{key} (ms)"), detail.join(", "));
        let Some(path) = &self.path else { return };
        if let Some(dir) = path.parent() {
            let _ = std::fs::create_dir_all(dir);
        }
        let lock = std::fs::File::create(path.with_extension("lock"));
        let _guard = lock.as_ref().ok().map(|f| f.lock());
        let on_disk: BTreeMap<String, String> =
            std::fs::read_to_string(path).ok().and_then(|t| serde_json::from_str(&t).ok()).unwrap_or_default();
        for (k, v) in on_disk {
            d.entry(k).or_insert(v);
        }
        if let Ok(text) = serde_json::to_string_pretty(&*d) {
            let thread = format!("{:?}", std::thread::current().id()).replace(|c: char| !c.is_ascii_alphanumeric(), "");
            let tmp = path.with_extension(format!("tmp{}.{thread}", std::process::id()));
            if std::fs::write(&tmp, text).is_ok() {
                let _ = std::fs::rename(&tmp, path);
            }
        }
    }
}
