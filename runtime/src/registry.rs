//! The GEMM kernel registry: for each GEMM shape, the generated kernel or a
//! library one (matrixmultiply's sgemm, as C = AB or as C^T = B^T A^T, or
//! the `gemm` crate, each followed by the generated epilogue), whichever
//! measured fastest on this machine.
//! Candidates are timed from a cold cache (64 MiB written between runs), as
//! a GEMM meets its weights inside a train step. Decisions are cached on disk
//! (`$AICF_CACHE_DIR/gemm-registry.json`, default
//! `~/.cache/aicf/gemm-registry.json`), keyed by the shape, the compiled
//! target and the thread count, so a shape is measured once per machine.
//! A decision records the times behind it; the first time a process uses
//! one it times the chosen candidate and the recorded runner-up again, and
//! measures every candidate anew when the choice now runs more than
//! [`DRIFT`] times slower than recorded (a machine that changed) or
//! [`FASTER`] times faster (a decision measured while it was busy).
//! Otherwise the two new times lower the recorded ones (a candidate keeps
//! its best: load only adds time), and the runner-up takes over once its
//! best beats the choice's by [`SWITCH`] ([`Registry::confirm`]), so a
//! measurement taken under load does not decide forever (GEMMs under
//! [`RECHECK_FLOOR_MS`] excepted). A new measurement of every candidate
//! likewise replaces a decision only when its winner beats the old choice
//! by [`SWITCH`] (noise does not flip it), and every session of the
//! process follows the new decision. Choices pinned by a checkpoint are
//! never re-measured.

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
    /// OpenBLAS's cblas_sgemm, opened at run time where installed
    OpenBlas,
    /// The runtime's own AVX-512 GEMM (`cpu::packed_gemm`), where the CPU
    /// has AVX-512
    Avx512,
    /// Its AVX2 kernel (`cpu::packed_gemm`), where the AVX-512 one is not
    /// a candidate and the CPU has AVX2 and FMA
    Avx2,
    /// bf16 operands multiplied as they are with AVX-512 BF16's dot
    /// product (`cpu::packed_gemm`), where the CPU has it
    Bf16Dot,
    /// Intel MKL's cblas_sgemm, opened at run time where installed
    Mkl,
    /// MKL's bf16 GEMM (`cblas_gemm_bf16bf16f32`: AMX tiles where the CPU
    /// has them) on a bf16 GEMM's operands as they are
    MklBf16,
}

impl Choice {
    pub const ALL: [Choice; 10] = [
        Choice::Generated,
        Choice::Library,
        Choice::LibrarySwapped,
        Choice::GemmRs,
        Choice::OpenBlas,
        Choice::Avx512,
        Choice::Avx2,
        Choice::Bf16Dot,
        Choice::Mkl,
        Choice::MklBf16,
    ];

    /// The candidate named `name` ("generated", "library", "library-swapped",
    /// "gemm-rs", "openblas", "avx512", "avx2", "bf16-dot", "mkl",
    /// "mkl-bf16").
    pub fn from_name(name: &str) -> Option<Choice> {
        Choice::ALL.into_iter().find(|c| c.name() == name)
    }

    pub fn name(self) -> &'static str {
        match self {
            Choice::Generated => "generated",
            Choice::Library => "library",
            Choice::LibrarySwapped => "library-swapped",
            Choice::GemmRs => "gemm-rs",
            Choice::OpenBlas => "openblas",
            Choice::Avx512 => "avx512",
            Choice::Avx2 => "avx2",
            Choice::Bf16Dot => "bf16-dot",
            Choice::Mkl => "mkl",
            Choice::MklBf16 => "mkl-bf16",
        }
    }
}

/// The version of the candidate set, part of every key: a decision measured
/// against older candidates (a slower generated kernel, say) is not reused.
/// v3: the gemm crate with its AVX-512 kernels; 16-bit GEMMs widened to f32
/// for the library candidates. v4: OpenBLAS. v5: the runtime's own AVX-512
/// GEMMs (f32, and bf16 on the CPU's bf16 dot product); the operand type in
/// the key. v6: those GEMMs pack transposed operands with in-register
/// transposes, and walk a one-block depth row panel by row panel. v7:
/// matrixmultiply (`library`, `library-swapped`) runs on the pool's
/// threads, one block each, instead of its own threads on every core;
/// small GEMMs keep the generated kernel unless a library candidate is
/// much faster ([`SMALL_LIBRARY_MARGIN`]). v8: the runtime's own AVX2
/// GEMM, where the AVX-512 one is not a candidate. v9: the runtime's own
/// GEMMs pack A faster (in-register transposes; split by rows, each thread
/// its own rows a block at a time); MKL's sgemm where installed. v10: a
/// GEMM under [`crate::cpu::GEMM_GRAIN_FMAS`] multiply-adds runs on one
/// thread whatever its candidate (library ones were split over every
/// thread, and lost to the generated kernel by their fork-join). v11:
/// every candidate splits over the runtime's spinning team
/// ([`crate::cpu::team`]) instead of a rayon pool, the `gemm` crate
/// single-threaded on each thread's block as the other libraries are.
/// v12: MKL's bf16 GEMM (AMX where the CPU has it) for bf16 GEMMs. v13:
/// the runtime's own GEMMs multiply a last row panel of 4 or 8 rows with a
/// tile of as many, and pack a large B a panel at a time where the split
/// is by columns.
const CANDIDATES: &str = "v13";

/// AICF's per-machine cache: `$AICF_CACHE_DIR` (set and not empty), else
/// `~/.cache/aicf` (`None` without a home directory).
pub fn cache_dir() -> Option<PathBuf> {
    std::env::var_os("AICF_CACHE_DIR")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        // (An empty or relative HOME is none: HOME= put the cache under
        // the current directory.)
        .or_else(|| {
            std::env::var_os("HOME").map(PathBuf::from).filter(|h| h.is_absolute()).map(|h| h.join(".cache/aicf"))
        })
}

/// A GEMM's shape, operand layouts and (where not f32) operand type, as
/// the keys write them: a bf16 GEMM has candidates an f32 one of the same
/// shape lacks, and other times.
fn shape(g: &LibraryGemm) -> String {
    let operands = g.widen.map(|d| format!(" operands {d:?}")).unwrap_or_default();
    format!("batch {} m {} n {} k {} a {:?} b {:?}{operands}", g.batch, g.m, g.n, g.k, g.a_strides, g.b_strides)
}

/// How much slower than the time its decision recorded the chosen
/// candidate may run before every candidate is measured again (a machine
/// that changed under the same cache).
pub const DRIFT: f64 = 1.5;

/// How much faster than recorded the chosen candidate may run before every
/// candidate is measured again: load only adds time, so a choice this much
/// faster was recorded while the machine was busy, and so were the others'
/// times (a runner-up re-check alone would never time the third candidate,
/// which the load may have hit hardest).
pub const FASTER: f64 = 1.2;

/// Decisions for GEMMs faster than this (ms) are not checked for drift:
/// their times are mostly noise, and their choice hardly moves a step.
pub const RECHECK_FLOOR_MS: f64 = 0.1;

/// How much faster than the old choice a candidate must be, by the best
/// time recorded for each, to replace a decision: closer than this, the
/// old choice stands (a tie does not flip back and forth, and a lead this
/// small in cold timings did not show in the train step). Every re-check
/// lowers the two candidates' recorded times to the best seen, since load
/// only ever adds time; a lead measured once under load that hit the
/// candidates unequally is corrected the next time they are timed. With
/// the old 1.2, decisions taken first under load stayed: the transformer
/// block ran OpenBLAS for six shapes where the runtime's AVX-512 GEMM or
/// the `gemm` crate had measured 8-16% faster, and its step's kernels took
/// 0.7-1.5 ms (2-4%) longer (AMD Zen 4, three interleaved pairs).
pub const SWITCH: f64 = 1.05;

/// How much faster than the generated kernel a library candidate must
/// measure to be chosen for a GEMM timed below [`RECHECK_FLOOR_MS`]. Such
/// a call's cold timing is mostly noise, and a library call pays in the
/// step what the timing loop hides (its fork-join on workers that went
/// to sleep between kernels): MLP 64's step took 0.11-0.27 ms with the
/// `gemm` crate chosen for its 32 x 128 x 128 product at 0.0307 ms
/// against the generated kernel's 0.0324, 0.09-0.11 with the generated
/// kernel (AMD Zen 4, 2 threads). Since v10 a GEMM under
/// [`crate::cpu::GEMM_GRAIN_FMAS`] runs on one thread whatever its
/// candidate, so no fork-join is left to hide there; the margin still
/// keeps a noisy lead from deciding.
pub const SMALL_LIBRARY_MARGIN: f64 = 1.5;

/// Nanoseconds this process has spent timing GEMM candidates: a shape's
/// first use on a machine, and the re-checks of recorded decisions. A
/// trainer reports it beside its training time, which it is part of.
static MEASURING_NS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Seconds this process has spent timing GEMM candidates: each new shape
/// once per machine, and the short re-check of a recorded decision on its
/// first use in a process.
pub fn measuring_seconds() -> f64 {
    MEASURING_NS.load(std::sync::atomic::Ordering::Relaxed) as f64 * 1e-9
}

/// Of [`MEASURING_NS`], the time spent on shapes the machine's registry
/// had no decision for (not the re-checks of recorded ones).
static FIRST_MEASURING_NS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Seconds this process has spent timing GEMM candidates for shapes the
/// machine's registry had not measured: what a second run does not spend.
pub fn first_measuring_seconds() -> f64 {
    FIRST_MEASURING_NS.load(std::sync::atomic::Ordering::Relaxed) as f64 * 1e-9
}

/// Adds the time from its start to its drop to [`measuring_seconds`] (and,
/// for a shape the registry had not measured, [`first_measuring_seconds`]).
pub(crate) struct MeasuringTimer(std::time::Instant, bool);

impl MeasuringTimer {
    pub(crate) fn start(first: bool) -> Self {
        MeasuringTimer(std::time::Instant::now(), first)
    }
}

impl Drop for MeasuringTimer {
    fn drop(&mut self) {
        let ns = u64::try_from(self.0.elapsed().as_nanos()).unwrap_or(u64::MAX);
        MEASURING_NS.fetch_add(ns, std::sync::atomic::Ordering::Relaxed);
        if self.1 {
            FIRST_MEASURING_NS.fetch_add(ns, std::sync::atomic::Ordering::Relaxed);
        }
    }
}

/// Keys this process has checked for drift, and the decisions it measured
/// again: every registry of the process reads these first, so two sessions
/// of one process (a model and its grown copy, batch-size variants) never
/// run different candidates for one key.
static CHECKED: Mutex<std::collections::BTreeSet<String>> = Mutex::new(std::collections::BTreeSet::new());
static REMEASURED: Mutex<BTreeMap<String, String>> = Mutex::new(BTreeMap::new());

/// A decision to check again: the time recorded for its choice, and the
/// recorded runner-up, timed beside it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Recheck {
    pub predicted: f64,
    pub runner_up: Option<Choice>,
}

/// Whether a candidate that recorded `predicted` ms and now takes `observed`
/// has drifted: [`DRIFT`] times slower or [`FASTER`] times faster (a
/// non-positive or non-finite time counts as drifted).
pub fn drifted(predicted: f64, observed: f64) -> bool {
    if !(predicted > 0.0 && predicted.is_finite() && observed > 0.0 && observed.is_finite()) {
        return true;
    }
    let ratio = observed / predicted;
    !(1.0 / FASTER..=DRIFT).contains(&ratio)
}

/// The time a decision's detail (`"generated 0.1234, library 0.0567"`)
/// records for candidate `name`.
fn recorded_time(detail: &str, name: &str) -> Option<f64> {
    recorded_times(detail).find_map(|(n, ms)| (n == name).then_some(ms))
}

/// Every candidate and time a decision's detail records, in its order
/// (unreadable parts skipped).
fn recorded_times(detail: &str) -> impl Iterator<Item = (&str, f64)> {
    detail.split(", ").filter_map(|part| {
        let (n, ms) = part.rsplit_once(' ')?;
        Some((n, ms.parse().ok()?))
    })
}

pub struct Registry {
    path: Option<PathBuf>,
    decisions: Mutex<BTreeMap<String, String>>,
    /// The choices this session ran (or was given by a checkpoint, which
    /// win over the machine's): what a checkpoint records, so that a resume
    /// on another machine or a fresh cache runs the same kernels and
    /// reaches the same bits.
    session: Mutex<BTreeMap<String, String>>,
    /// Keys whose choice a checkpoint pinned (never re-measured).
    pinned: Mutex<std::collections::BTreeSet<String>>,
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
        Registry { path, decisions: Mutex::new(decisions), session: Mutex::default(), pinned: Mutex::default() }
    }

    /// Makes `choices` (key -> candidate name, as [`Registry::choices`]
    /// returns them) this session's, ahead of the machine's decisions.
    pub fn pin(&self, choices: &BTreeMap<String, String>) {
        if let Ok(mut s) = self.session.lock() {
            s.extend(choices.iter().map(|(k, v)| (k.clone(), v.clone())));
        }
        if let Ok(mut p) = self.pinned.lock() {
            p.extend(choices.keys().cloned());
        }
    }

    /// What to re-check of the machine's decision for `key` (chosen
    /// candidate `name`): the time it recorded for the choice and the
    /// runner-up it recorded (the next fastest), the first time this
    /// process asks, and only for a decision read from the machine's file
    /// (not one a checkpoint pinned, nor one this process measured) whose
    /// recorded time is at least [`RECHECK_FLOOR_MS`]. A decision recorded
    /// without times is checked against 0 ms, that is, measured again.
    pub fn recheck_due(&self, key: &str, name: &str) -> Option<Recheck> {
        let mut checked = CHECKED.lock().ok()?;
        if checked.contains(key) || self.pinned.lock().ok()?.contains(key) {
            return None;
        }
        checked.insert(key.to_string());
        let d = self.decisions.lock().ok()?;
        if d.get(key).map(String::as_str) != Some(name) {
            return None;
        }
        let detail = d.get(&format!("{key} (ms)")).map(String::as_str).unwrap_or("");
        let runner_up = recorded_times(detail)
            .filter(|(c, _)| *c != name)
            .filter_map(|(c, ms)| Some((Choice::from_name(c)?, ms)))
            .min_by(|a, b| a.1.total_cmp(&b.1))
            .map(|(c, _)| c);
        match recorded_time(detail, name) {
            Some(ms) if ms < RECHECK_FLOOR_MS => None,
            Some(ms) => Some(Recheck { predicted: ms, runner_up }),
            None => Some(Recheck { predicted: 0.0, runner_up }),
        }
    }

    /// Decides `key` from measured `times`: the fastest candidate (but the
    /// generated kernel for a small GEMM, unless a library candidate beats
    /// it by [`SMALL_LIBRARY_MARGIN`]), or, when the key already had a
    /// decision (`incumbent`, being re-measured), the fastest only if it
    /// beats the incumbent by [`SWITCH`]. Records the
    /// decision and the times, for this process's other sessions too.
    pub fn decide(&self, key: String, incumbent: Option<Choice>, times: &[(Choice, f64)]) -> Choice {
        let time = |c: Choice| times.iter().find(|t| t.0 == c).map_or(f64::INFINITY, |t| t.1);
        let mut fastest = times.iter().min_by(|x, y| x.1.total_cmp(&y.1)).map_or(Choice::Generated, |t| t.0);
        let generated = time(Choice::Generated);
        if generated < RECHECK_FLOOR_MS && generated < time(fastest) * SMALL_LIBRARY_MARGIN {
            fastest = Choice::Generated;
        }
        let choice = match incumbent {
            Some(old) if !(time(fastest) * SWITCH < time(old)) => old,
            _ => fastest,
        };
        if incumbent.is_some()
            && let Ok(mut r) = REMEASURED.lock()
        {
            r.insert(key.clone(), choice.name().to_string());
        }
        self.set(key, choice, times);
        choice
    }

    /// Settles a re-checked decision that did not drift: `choice` and the
    /// recorded runner-up were timed again (`observed`, `runner_up`). Each
    /// candidate's recorded time becomes the best of the recorded and the
    /// new one; the runner-up replaces the choice if its best beats the
    /// choice's by [`SWITCH`]. Writes the file only when a time or the
    /// choice changed; every session of the process follows the result.
    pub fn confirm(&self, key: String, choice: Choice, observed: f64, runner_up: Option<(Choice, f64)>) -> Choice {
        let detail =
            self.decisions.lock().ok().and_then(|d| d.get(&format!("{key} (ms)")).cloned()).unwrap_or_default();
        let mut times: Vec<(String, f64)> = recorded_times(&detail).map(|(c, ms)| (c.to_string(), ms)).collect();
        let mut changed = false;
        // A candidate's best time, lowered to `ms` where that is a faster
        // real time (an infinite one, from a candidate that did not run,
        // leaves the record as it was).
        let mut best = |c: Choice, ms: f64| -> f64 {
            let fresh = ms.is_finite() && ms > 0.0;
            match times.iter_mut().find(|t| t.0 == c.name()) {
                Some(t) if fresh && ms < t.1 => {
                    t.1 = ms;
                    changed = true;
                    ms
                }
                Some(t) => t.1,
                None if fresh => {
                    times.push((c.name().to_string(), ms));
                    changed = true;
                    ms
                }
                None => f64::INFINITY,
            }
        };
        let mine = best(choice, observed);
        let winner = match runner_up {
            Some((c, ms)) if best(c, ms) * SWITCH < mine => c,
            _ => choice,
        };
        if let Ok(mut r) = REMEASURED.lock() {
            r.insert(key.clone(), winner.name().to_string());
        }
        if changed || winner != choice {
            let named: Vec<(&str, f64)> = times.iter().map(|(c, ms)| (c.as_str(), *ms)).collect();
            self.set_named(key, winner.name(), &named);
        }
        winner
    }

    /// The choices this session ran (or was given by a checkpoint): what a
    /// checkpoint records. (Every decision the machine held for the same
    /// target and thread count went with them, for shapes a grown model
    /// might meet: thousands of other models' shapes, 300 KB a checkpoint
    /// of a 2,000-parameter model, its bytes changing with other runs.)
    pub fn choices(&self) -> BTreeMap<String, String> {
        self.session.lock().map(|s| s.clone()).unwrap_or_default()
    }

    /// `choices` (a checkpoint's, keyed by [`Registry::key`]) with each
    /// decision taken at another thread count also under the key of
    /// `threads`, where that has none: a run resumed with another
    /// `--threads` (or on a machine with another number of cores) replays
    /// its kernels (no key matched: every GEMM was timed again, and the
    /// kernels chosen changed the run's bits).
    pub fn at_threads(choices: &BTreeMap<String, String>, threads: usize) -> BTreeMap<String, String> {
        let mut out = choices.clone();
        for (k, v) in choices {
            let Some((prefix, rest)) = k.split_once(": ") else { continue };
            let Some((head, tail)) = prefix.rsplit_once("/t") else { continue };
            let digits = tail.bytes().take_while(u8::is_ascii_digit).count();
            if digits == 0 || tail[..digits] == threads.to_string() {
                continue;
            }
            out.entry(format!("{head}/t{threads}{}: {rest}", &tail[digits..])).or_insert_with(|| v.clone());
        }
        out
    }

    pub fn key(g: &LibraryGemm, call: &Call, target: &str, threads: usize) -> String {
        let epilogue = call.library.as_ref().and_then(|l| l.epilogue.as_ref()).is_some();
        // Decisions taken without the BLAS libraries (a process whose
        // address space is too small for them) are kept apart: on the
        // machine's own keys they would stand for every later run, which
        // has those candidates.
        let no_blas = if crate::cpu::blas::address_space_too_small() { " (no BLAS: ulimit -v)" } else { "" };
        format!("{CANDIDATES}/{target}/t{threads}{no_blas}: {} epilogue {epilogue}", shape(g))
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
        let remeasured = REMEASURED.lock().ok()?.get(key).cloned();
        let c = match remeasured {
            Some(c) => c,
            None => self.decisions.lock().ok()?.get(key).cloned()?,
        };
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
            // (A write cut short by a full disk is not left behind.)
            if std::fs::write(&tmp, text).and_then(|()| std::fs::rename(&tmp, path)).is_err() {
                let _ = std::fs::remove_file(&tmp);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn choices_recorded_at_another_thread_count_replay_at_this_one() {
        let choices = BTreeMap::from([
            (format!("{CANDIDATES}/x86/t2: 256x512x512 epilogue false"), "avx512".to_string()),
            (format!("{CANDIDATES}/x86/t2 (no BLAS: ulimit -v): 8x8x8 epilogue true"), "generated".to_string()),
            (format!("{CANDIDATES}/x86/t1: 256x512x512 epilogue false"), "gemm-rs".to_string()),
        ]);
        let at = Registry::at_threads(&choices, 1);
        // One of its own count is kept; the others are added under it.
        assert_eq!(at[&format!("{CANDIDATES}/x86/t1: 256x512x512 epilogue false")], "gemm-rs");
        assert_eq!(at[&format!("{CANDIDATES}/x86/t1 (no BLAS: ulimit -v): 8x8x8 epilogue true")], "generated");
        assert_eq!(at.len(), 4);
        let at = Registry::at_threads(&choices, 16);
        assert_eq!(at[&format!("{CANDIDATES}/x86/t16 (no BLAS: ulimit -v): 8x8x8 epilogue true")], "generated");
        assert_eq!(at.len(), 5);
    }

    fn registry(decisions: &[(&str, &str)]) -> Registry {
        Registry {
            path: None,
            decisions: Mutex::new(decisions.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()),
            session: Mutex::default(),
            pinned: Mutex::default(),
        }
    }

    #[test]
    fn drift_is_a_ratio_beyond_the_bound_either_way() {
        assert!(!drifted(1.0, 1.0));
        assert!(!drifted(1.0, 1.4));
        assert!(!drifted(1.0, 0.85));
        assert!(drifted(1.0, 1.6));
        assert!(drifted(1.0, 0.8), "recorded under load");
        assert!(drifted(0.0, 1.0));
        assert!(drifted(1.0, f64::NAN));
        assert_eq!(recorded_time("generated 0.1234, library 0.0567, library-swapped 1.5", "library"), Some(0.0567));
        assert_eq!(recorded_time("generated 0.1234", "gemm-rs"), None);
    }

    #[test]
    fn a_machine_decision_is_rechecked_once_per_process_and_never_when_pinned_or_tiny() {
        let (k, pinned, tiny, bare) = ("t1/a", "t1/b", "t1/c", "t1/d");
        let r = registry(&[
            (k, "library"),
            ("t1/a (ms)", "generated 2.0000, library 1.0000"),
            (pinned, "library"),
            ("t1/b (ms)", "generated 2.0000, library 1.0000"),
            (tiny, "generated"),
            ("t1/c (ms)", "generated 0.0100, library 0.0200"),
            (bare, "generated"),
        ]);
        r.pin(&BTreeMap::from([(pinned.to_string(), "library".to_string())]));
        assert_eq!(r.recheck_due(k, "library"), Some(Recheck { predicted: 1.0, runner_up: Some(Choice::Generated) }));
        assert_eq!(r.recheck_due(k, "library"), None, "once per process");
        assert_eq!(registry(&[(k, "library")]).recheck_due(k, "library"), None, "for every registry of the process");
        assert_eq!(r.recheck_due(pinned, "library"), None);
        assert_eq!(r.recheck_due(tiny, "generated"), None);
        assert_eq!(
            r.recheck_due(bare, "generated"),
            Some(Recheck { predicted: 0.0, runner_up: None }),
            "no recorded time: measured again"
        );
    }

    #[test]
    fn a_remeasurement_switches_only_past_the_margin_and_every_session_follows_it() {
        let r = registry(&[("t2/a", "library"), ("t2/b", "library")]);
        let close = [(Choice::Generated, 1.0), (Choice::Library, 1.04)];
        assert_eq!(r.decide("t2/a".into(), Some(Choice::Library), &close), Choice::Library);
        let clear = [(Choice::Generated, 1.0), (Choice::Library, 1.5)];
        assert_eq!(r.decide("t2/b".into(), Some(Choice::Library), &clear), Choice::Generated);
        // A fresh measurement takes the fastest.
        assert_eq!(r.decide("t2/c".into(), None, &close), Choice::Generated);
        // Another registry of the process, opened on the old decisions, runs the new one.
        let other = registry(&[("t2/b", "library")]);
        assert_eq!(other.get("t2/b"), Some(Choice::Generated));
        assert!(r.decisions.lock().unwrap()["t2/b (ms)"].contains("library 1.5000"));
    }

    /// A re-check that did not drift keeps each candidate's best time and
    /// switches to the runner-up once its best beats the choice's by the
    /// margin: a decision first measured under load is corrected, and a
    /// tie is not flipped.
    #[test]
    fn a_recheck_keeps_best_times_and_switches_to_a_runner_up_past_the_margin() {
        let r = registry(&[
            ("t3/a", "openblas"),
            ("t3/a (ms)", "generated 9.0000, openblas 3.1700, avx512 3.0500"),
            ("t3/b", "openblas"),
            ("t3/b (ms)", "openblas 3.0000, avx512 2.9500"),
            ("t3/c", "openblas"),
            ("t3/c (ms)", "openblas 3.0000, avx512 3.2000"),
        ]);
        // Both ran slower than recorded (load): the records keep their
        // best, which still favour the choice within the margin.
        assert_eq!(r.confirm("t3/a".into(), Choice::OpenBlas, 3.4, Some((Choice::Avx512, 3.1))), Choice::OpenBlas);
        assert_eq!(r.decisions.lock().unwrap()["t3/a (ms)"], "generated 9.0000, openblas 3.1700, avx512 3.0500");
        // Now the runner-up's best beats the choice's by more than 5%.
        assert_eq!(r.confirm("t3/a".into(), Choice::OpenBlas, 3.2, Some((Choice::Avx512, 2.7))), Choice::Avx512);
        assert_eq!(r.decisions.lock().unwrap()["t3/a"], "avx512");
        assert_eq!(r.decisions.lock().unwrap()["t3/a (ms)"], "generated 9.0000, openblas 3.1700, avx512 2.7000");
        assert_eq!(registry(&[("t3/a", "openblas")]).get("t3/a"), Some(Choice::Avx512), "the process follows it");
        // A 2% lead is a tie: the choice stands.
        assert_eq!(r.confirm("t3/b".into(), Choice::OpenBlas, 2.95, Some((Choice::Avx512, 2.9))), Choice::OpenBlas);
        assert!(r.decisions.lock().unwrap()["t3/b (ms)"].contains("openblas 2.9500"));
        // The choice got faster: its record is lowered, nothing else moves.
        assert_eq!(r.confirm("t3/c".into(), Choice::OpenBlas, 2.8, Some((Choice::Avx512, 3.3))), Choice::OpenBlas);
        assert_eq!(r.decisions.lock().unwrap()["t3/c (ms)"], "openblas 2.8000, avx512 3.2000");
        // A runner-up that did not run (infinite) leaves its record as it was.
        assert_eq!(
            r.confirm("t3/c".into(), Choice::OpenBlas, 2.9, Some((Choice::Avx512, f64::INFINITY))),
            Choice::OpenBlas
        );
        assert_eq!(r.decisions.lock().unwrap()["t3/c (ms)"], "openblas 2.8000, avx512 3.2000");
    }

    #[test]
    fn a_small_gemm_keeps_the_generated_kernel_unless_a_library_is_much_faster() {
        let r = registry(&[]);
        let close = [(Choice::Generated, 0.0324), (Choice::GemmRs, 0.0307), (Choice::Library, 0.0400)];
        assert_eq!(r.decide("t2/small".into(), None, &close), Choice::Generated);
        let clear = [(Choice::Generated, 0.0500), (Choice::OpenBlas, 0.0200)];
        assert_eq!(r.decide("t2/clear".into(), None, &clear), Choice::OpenBlas);
        // Above the floor the fastest is taken.
        let large = [(Choice::Generated, 0.5000), (Choice::GemmRs, 0.4500)];
        assert_eq!(r.decide("t2/large".into(), None, &large), Choice::GemmRs);
    }

    /// A bf16 GEMM is measured apart from an f32 one of the same shape:
    /// it has other candidates (`bf16-dot`) and other times.
    #[test]
    fn the_operand_type_is_part_of_the_key() {
        let f32_gemm = LibraryGemm::contiguous(1, (256, 512, 784), false, true);
        let bf16_gemm = LibraryGemm { widen: Some(crate::artifact::DType::BF16), ..f32_gemm.clone() };
        let f16_gemm = LibraryGemm { widen: Some(crate::artifact::DType::F16), ..f32_gemm.clone() };
        let keys = [&f32_gemm, &bf16_gemm, &f16_gemm].map(shape);
        assert!(keys[0] != keys[1] && keys[1] != keys[2] && keys[0] != keys[2], "{keys:?}");
        assert!(keys[1].ends_with("operands BF16"), "{}", keys[1]);
    }
}
