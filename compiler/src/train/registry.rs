//! The run registry: every training run, in one SQLite database (`rusqlite`
//! with its bundled SQLite), so that past runs can be compared and can
//! propose structures for new problems ([`super::propose`]).
//!
//! A run's record holds its model's structure ([`Fingerprint`]: op
//! histogram, depth, layer widths, parameters, FLOPs per step, a hash of the
//! graph that ignores names), its problem ([`Problem`]: shapes, task,
//! classes, rows, label entropy, a linear probe's loss), its settings
//! (optimizer, precision, learning rate, batch, seed), its held-out loss
//! against cumulative training FLOPs (a row per epoch), every growth
//! decision with the IR before and after, and how it ended.
//!
//! Schema (version 1; `aicf runs schema` prints it):
//!
//! ```text
//! runs(id, started, finished, status, pid, host, command, model, model_hash,
//!      graph_hash, fingerprint JSON, final_fingerprint JSON, problem JSON,
//!      settings JSON, data, seed,
//!      error, epochs, steps, train_flops, params, best_val_loss,
//!      final_val_loss, final_val_accuracy, seconds)
//! curve(run_id, epoch, step, train_flops, train_loss, val_loss,
//!       val_accuracy, params, seconds)
//! decisions(run_id, seq, step, epoch, trigger, action, outcome, reason,
//!           params_before, params_after, loss_before, loss_after,
//!           ir_before, ir_after)
//! tags(run_id, tag)        -- `aicf runs tag`
//! notes(run_id, note)      -- `aicf runs note`
//! meta(key, value)         -- 'schema': the version; 'deleted_through':
//!                          -- the highest id `aicf runs delete` removed
//! ```
//!
//! A deleted run's id is not given again ([`Runs::begin`] numbers past
//! `deleted_through`): a checkpoint that names it never resumes into
//! another run's row.
//!
//! Each write is one transaction (SQLite's journal in WAL mode), so a
//! killed run leaves the database whole: its row says `running`, and
//! [`Runs::list`] shows it as `unfinished` once its process is gone.
//! Several processes may record at once (a busy writer is waited for).

use super::TrainError;
use super::report::EpochRecord;
use rusqlite::{Connection, OptionalExtension, params};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

type Result<T, E = TrainError> = std::result::Result<T, E>;

/// The schema, created when a database is opened for the first time.
pub const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS runs (
    id INTEGER PRIMARY KEY,
    started TEXT NOT NULL,
    finished TEXT,
    status TEXT NOT NULL,            -- running | finished | failed | interrupted (`runs list` shows a running row whose process is gone as unfinished)
    pid INTEGER,
    host TEXT,
    command TEXT,                    -- the command line (a resumed run: one a line, the first first)
    model TEXT,                      -- the model file
    model_hash TEXT,                 -- hash of its canonical IR
    graph_hash TEXT,                 -- hash of its graph, names ignored
    fingerprint TEXT NOT NULL,       -- JSON: Fingerprint (the model it started with)
    final_fingerprint TEXT,          -- JSON: Fingerprint (the model it ended with)
    problem TEXT NOT NULL,           -- JSON: Problem
    settings TEXT NOT NULL,          -- JSON: Settings
    data TEXT,                       -- the data files
    seed INTEGER,
    error TEXT,
    epochs INTEGER,
    steps INTEGER,
    train_flops REAL,
    params INTEGER,
    best_val_loss REAL,
    final_val_loss REAL,
    final_val_accuracy REAL,
    seconds REAL
);
CREATE TABLE IF NOT EXISTS curve (
    run_id INTEGER NOT NULL REFERENCES runs(id),
    epoch INTEGER NOT NULL,
    step INTEGER,
    train_flops REAL,
    train_loss REAL,
    val_loss REAL,
    val_accuracy REAL,
    params INTEGER,
    seconds REAL,
    PRIMARY KEY (run_id, epoch)
);
CREATE TABLE IF NOT EXISTS decisions (
    run_id INTEGER NOT NULL REFERENCES runs(id),
    seq INTEGER NOT NULL,
    step INTEGER,
    epoch INTEGER,
    trigger TEXT,
    action TEXT,
    outcome TEXT,
    reason TEXT,
    params_before INTEGER,
    params_after INTEGER,
    loss_before REAL,
    loss_after REAL,
    ir_before TEXT,
    ir_after TEXT,
    PRIMARY KEY (run_id, seq)
);
CREATE TABLE IF NOT EXISTS tags (
    run_id INTEGER NOT NULL REFERENCES runs(id),
    tag TEXT NOT NULL,               -- `aicf runs tag`
    PRIMARY KEY (run_id, tag)
);
CREATE TABLE IF NOT EXISTS notes (
    run_id INTEGER PRIMARY KEY REFERENCES runs(id),
    note TEXT NOT NULL               -- `aicf runs note`
);
CREATE INDEX IF NOT EXISTS runs_graph ON runs(graph_hash);
";

pub const SCHEMA_VERSION: &str = "1";

/// A model's structure, as the proposer compares models.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Fingerprint {
    /// `hl` ops of `@forward` by name (`hl.linear: 2`).
    pub ops: BTreeMap<String, usize>,
    /// Layers with a weight matrix or filter bank, in order.
    pub depth: usize,
    /// Their output widths (a linear layer's units, a convolution's
    /// channels), in declaration order.
    pub widths: Vec<usize>,
    pub params: usize,
    /// The train step's FLOPs (matrix products, convolutions, attention).
    pub flops_per_step: f64,
    /// Hash of the model's IR with every symbol, owner and location
    /// replaced by its position: two models that differ only in names
    /// share it.
    pub graph_hash: String,
    /// `mlp`, `cnn`, `transformer` or `other`: what the proposer adapts.
    pub kind: String,
    /// The structure in the proposer's terms, free of the problem's shapes
    /// (`mlp 64-64`: hidden widths; `lm 2x64`: transformer blocks x
    /// width; empty for other models; see [`crate::train::propose`]).
    #[serde(default)]
    pub structure: String,
}

/// A problem, as the proposer compares problems.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Problem {
    /// The data's name (its file's stem).
    pub name: String,
    /// `classification`, `regression` or `text`.
    pub task: String,
    /// One example's input shape.
    pub input: Vec<usize>,
    /// Classes (classification, text: the vocabulary), or 1 (regression).
    pub outputs: usize,
    /// Training examples (text: tokens).
    pub rows: usize,
    /// The label distribution's entropy in nats (regression: the log of
    /// the targets' standard deviation).
    pub label_entropy: f64,
    /// The loss of the constant predictor (classification: the entropy;
    /// regression: the variance; text: the unigram entropy).
    pub baseline_loss: f64,
    /// A cheap probe's held-out loss: a linear model (classification:
    /// softmax regression; regression: least squares; text: a bigram
    /// model).
    pub probe_loss: f64,
    /// The data's content (each file's hash, as a checkpoint records its
    /// data): the same data under another name, or other data under the
    /// same name, is told apart. Absent in runs recorded before it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_hash: Option<String>,
}

impl Problem {
    /// Whether `self` and `other` are one data set: the same content where
    /// both record it, else the same name and shapes.
    pub fn same_data(&self, other: &Problem) -> bool {
        match (&self.data_hash, &other.data_hash) {
            (Some(a), Some(b)) => super::run::same_data(a, b),
            _ => {
                (&self.name, &self.task, &self.input, self.outputs, self.rows)
                    == (&other.name, &other.task, &other.input, other.outputs, other.rows)
            }
        }
    }

    /// The probe's loss relative to the constant predictor's: how much a
    /// linear model already explains (0: all, 1: nothing).
    pub fn probe_ratio(&self) -> f64 {
        if self.baseline_loss > 0.0 { (self.probe_loss / self.baseline_loss).clamp(0.0, 2.0) } else { 1.0 }
    }
}

/// How a run trains.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Settings {
    pub optimizer: String,
    pub lr: f64,
    pub momentum: f64,
    /// SGD's Nesterov momentum (absent in older records: false).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub nesterov: bool,
    pub weight_decay: f64,
    pub precision: String,
    pub batch: usize,
    pub epochs: usize,
    /// The growth policy's file, for an adaptive run.
    pub policy: Option<String>,
    /// Whether that policy has a rule that grows the model (a rollback-only
    /// policy, as `aicf propose` writes beside a plain proposal, has none):
    /// such a run tried its structure grown, any other its structure as it
    /// is. Absent in older records: any policy counted as growing.
    #[serde(default)]
    pub policy_grows: Option<bool>,
    pub replicas: usize,
    /// Features read standardized (`aicf train --standardize`; absent in
    /// older records: false). The proposer ranks only runs without, as its
    /// problem descriptors and proposals read features as they are.
    #[serde(default)]
    pub standardize: bool,
    /// A regression's targets read standardized (`--standardize-targets`;
    /// absent where not, and in older records).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub standardize_targets: bool,
    /// The training images' augmentation (`--augment`, as it reads it;
    /// absent where none, and in older records).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub augment: Option<String>,
    /// The checkpoint directory the run writes (its canonical path; absent
    /// in older records and for a run without one). A resume from another
    /// directory (a copy of this one) is a run of its own: it took over
    /// this row, and the original's resume then wrote over its epochs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checkpoint_dir: Option<String>,
    /// The rest of what tells two runs apart (absent in older records):
    /// the learning-rate schedule as `--lr-schedule` reads it (`constant`,
    /// `cosine:warmup=...`), Adam's betas and eps, the gradient clip norm,
    /// the micro-batches a step accumulates, a text's windows per epoch
    /// and held-out windows, the run directory (`--out`) and the working
    /// directory the command ran in (its relative paths are of it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lr_schedule: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub betas: Option<(f64, f64)>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eps: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clip_norm: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accumulate: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub windows_per_epoch: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eval_windows: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub out: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workdir: Option<String>,
    /// The GEMM candidate forced on every GEMM (`--gemm`; absent: each
    /// shape's measured choice, and in older records).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gemm: Option<String>,
    /// Where it ran (`cpu, 2 threads`, `cuda:0 (NVIDIA H100 ...)`; absent
    /// in older records).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device: Option<String>,
}

/// What a run records when it starts.
#[derive(Clone, Debug, Default)]
pub struct NewRun {
    pub command: String,
    pub model: String,
    pub model_hash: String,
    pub fingerprint: Fingerprint,
    pub problem: Problem,
    pub settings: Settings,
    pub data: String,
    pub seed: u64,
    /// When the run started, as [`now`] writes it (`None`: now): a row
    /// written at the run's end, the registry locked at its start, keeps
    /// its start.
    pub started: Option<String>,
}

/// A growth decision, as recorded.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct DecisionRecord {
    pub step: u64,
    pub epoch: usize,
    pub trigger: String,
    pub action: String,
    pub outcome: String,
    pub reason: String,
    pub params_before: usize,
    pub params_after: usize,
    pub loss_before: Option<f64>,
    pub loss_after: Option<f64>,
    pub ir_before: String,
    pub ir_after: String,
}

/// One run, as listed.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunRow {
    pub id: i64,
    pub started: String,
    /// `running`, `finished`, `failed`, `interrupted` (a Ctrl-C or SIGTERM: it can
    /// be resumed), or `unfinished` (recorded as running by a process that
    /// is gone: killed).
    pub status: String,
    pub model: String,
    pub problem: Problem,
    pub fingerprint: Fingerprint,
    /// The structure it ended with (a grown model's), once finished.
    pub final_fingerprint: Option<Fingerprint>,
    pub settings: Settings,
    pub epochs: Option<i64>,
    pub steps: Option<i64>,
    pub train_flops: Option<f64>,
    pub best_val_loss: Option<f64>,
    pub final_val_loss: Option<f64>,
    pub final_val_accuracy: Option<f64>,
    pub seconds: Option<f64>,
    pub error: Option<String>,
    /// Its tags (`aicf runs tag`), sorted (none in registries written
    /// before them).
    #[serde(default)]
    pub tags: Vec<String>,
    /// Its note (`aicf runs note`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// A run with its curve and decisions.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunDetail {
    pub run: RunRow,
    pub command: String,
    pub data: String,
    pub seed: i64,
    pub curve: Vec<CurvePoint>,
    pub decisions: Vec<DecisionRecord>,
}

/// A run's held-out loss at the end of an epoch, against FLOPs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CurvePoint {
    pub epoch: i64,
    pub step: i64,
    pub train_flops: f64,
    pub train_loss: f64,
    pub val_loss: Option<f64>,
    pub val_accuracy: Option<f64>,
}

/// The registry's database.
pub struct Runs {
    conn: Connection,
    path: PathBuf,
}

/// What to do about a damaged registry, said after SQLite's words (not
/// by `aicf runs check`, which is what it points to).
const DAMAGED: &str = "; the file is damaged: `aicf runs check` says what still reads; move it aside to start a new \
                       registry there, or give another with --runs-db (--no-runs-db records nothing)";

fn db_error(path: &Path) -> impl Fn(rusqlite::Error) -> TrainError + '_ {
    move |e| {
        // A damaged file (SQLite's own words say so, not what to do).
        let advice = match e.sqlite_error_code() {
            Some(rusqlite::ErrorCode::NotADatabase) => {
                " (or its header is damaged): give the registry's own file with --runs-db, or move this one aside \
                 to start a new registry there (--no-runs-db records nothing)"
            }
            Some(rusqlite::ErrorCode::DatabaseCorrupt) => DAMAGED,
            // (SQLite's words name no cause a user can act on.)
            Some(rusqlite::ErrorCode::DiskFull) => {
                " (the disk holding it is full: free space there, or give another file with --runs-db; --no-runs-db \
                 records nothing)"
            }
            Some(rusqlite::ErrorCode::SystemIoFailure) => {
                " (a full disk, or a file system that refuses SQLite's writes or locks: free space, or give a file on \
                 another with --runs-db; --no-runs-db records nothing)"
            }
            Some(rusqlite::ErrorCode::CannotOpen) => {
                " (its directory is missing, read-only or not this user's: give another file with --runs-db; \
                 --no-runs-db records nothing)"
            }
            _ => "",
        };
        TrainError::Io { path: path.to_path_buf(), message: format!("run registry: {e}{advice}") }
    }
}

/// Seconds since the Unix epoch, as ISO 8601 (UTC).
pub(crate) fn now() -> String {
    let secs = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let (days, rest) = (secs / 86400, secs % 86400);
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days as i64 + 719468;
    let era = z.div_euclid(146097);
    let doe = z - era * 146097;
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + (m <= 2) as i64;
    format!("{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z", rest / 3600, rest % 3600 / 60, rest % 60)
}

/// Whether the process `pid` that recorded a run on `host` (started at
/// `started`) is gone: no process of that id on this machine, or one
/// started after the run did (ids are reused: after a reboot, in a
/// container, a killed run read as running for ever). A run of another
/// machine cannot be told: not gone.
fn process_gone(pid: Option<i64>, host: Option<&str>, this_host: &str, started: &str) -> bool {
    let reused = |p: i64| process_started(p).zip(epoch_seconds(started)).is_some_and(|(proc, run)| proc > run + 2);
    pid.is_some_and(|p| !Path::new(&format!("/proc/{p}")).exists() || reused(p))
        && host == Some(this_host)
        && Path::new("/proc/self").exists()
}

/// Why `tag` is no tag, if it is not.
pub fn check_tag(tag: &str) -> std::result::Result<(), String> {
    if tag.is_empty() || tag.chars().count() > 64 {
        return Err(format!("tag {tag:?}: a tag has 1 to 64 characters"));
    }
    // (Invisible format characters too: `zero\u{200b}width` read as
    // `zerowidth` in the list, and `--tag zerowidth` did not find it.)
    let invisible = |c: char| matches!(c, '\u{ad}' | '\u{200b}'..='\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2060}'..='\u{2064}' | '\u{feff}');
    if let Some(c) = tag.chars().find(|&c| c.is_whitespace() || c.is_control() || invisible(c) || c == ',') {
        return Err(format!(
            "tag {tag:?}: a tag holds no spaces, commas, control or invisible characters (found {c:?})"
        ));
    }
    // (One that starts as an option does is read as one: given again, it
    // needed a `--` before it.)
    if tag.starts_with('-') {
        return Err(format!("tag {tag:?}: a tag does not start with '-'"));
    }
    Ok(())
}

/// Seconds since 1970 of a time [`now`] wrote (`2026-12-07T11:17:01Z`);
/// `None` where it does not read so.
fn epoch_seconds(text: &str) -> Option<i64> {
    let b = text.as_bytes();
    if b.len() != 20 || b[4] != b'-' || b[7] != b'-' || b[10] != b'T' || b[13] != b':' || b[16] != b':' || b[19] != b'Z'
    {
        return None;
    }
    let n = |r: std::ops::Range<usize>| text.get(r)?.parse::<i64>().ok();
    let (y, m, d) = (n(0..4)?, n(5..7)?, n(8..10)?);
    // Days since 1970-01-01 of a civil date (Howard Hinnant's algorithm,
    // the inverse of `now`'s).
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146097 + doe - 719468;
    Some(days * 86400 + n(11..13)? * 3600 + n(14..16)? * 60 + n(17..19)?)
}

/// When process `pid` of this machine started (seconds since 1970), from
/// `/proc`: `None` where it cannot be read.
fn process_started(pid: i64) -> Option<i64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // (Its name, in parentheses, may hold spaces: the fields after it.)
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let ticks: i64 = fields.get(19)?.parse().ok()?;
    let boot: i64 = std::fs::read_to_string("/proc/stat")
        .ok()?
        .lines()
        .find_map(|l| l.strip_prefix("btime ").and_then(|v| v.trim().parse().ok()))?;
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    (hz > 0).then(|| boot + ticks / hz as i64)
}

fn finite(v: f64) -> Option<f64> {
    v.is_finite().then_some(v)
}

/// SQLite's busy handler for the registry: waits 10 ms at a time, up to
/// 30 s in all (then the write fails: "database is locked"), saying so on
/// stderr once a second has passed.
fn wait_for_registry(tries: i32) -> bool {
    const STEP_MS: i32 = 10;
    if tries == 1000 / STEP_MS {
        eprintln!("note: waiting for the run registry: another process holds it (at most 30 s)");
    }
    if tries >= 30_000 / STEP_MS {
        return false;
    }
    std::thread::sleep(std::time::Duration::from_millis(STEP_MS as u64));
    true
}

/// Whether `error` (a registry's) is SQLite's "database is locked":
/// another process's write held it past the wait.
pub fn is_locked(error: &str) -> bool {
    error.contains("database is locked")
}

/// The environment variable `aicf train --nproc` sets for its ranks: rank 0
/// writes there `<registry>#<run id>`, the row it records the run in.
pub const NPROC_RECORD_ENV: &str = "AICF_NPROC_RUN_RECORD";

/// Where rank 0 of an interrupted `--nproc` run leaves its exit status
/// for the launcher: beside the [`NPROC_RECORD_ENV`] file `record`.
pub fn nproc_status_file(record: &std::ffi::OsStr) -> PathBuf {
    let mut file = record.to_owned();
    file.push(".status");
    PathBuf::from(file)
}

/// The environment variable `aicf train --nproc` sets for its ranks: the
/// command the user gave (with `--nproc N`), which the registry records;
/// the ranks' own (`... --data-parallel`, without `--nproc`) trained one
/// process when run again.
pub const NPROC_COMMAND_ENV: &str = "AICF_NPROC_COMMAND";

impl Runs {
    /// Where runs are recorded by default: `$AICF_RUNS_DB` if set (`off`:
    /// nowhere), else `$XDG_DATA_HOME/aicf/runs.sqlite`, else
    /// `~/.local/share/aicf/runs.sqlite`.
    pub fn default_path() -> Option<PathBuf> {
        match std::env::var_os("AICF_RUNS_DB") {
            Some(v) if v == "off" || v.is_empty() => return None,
            Some(v) => return Some(PathBuf::from(v)),
            None => {}
        }
        // (An empty or relative one is none, as the XDG specification
        // says: HOME= put the registry under the current directory.)
        let absolute = |v: std::ffi::OsString| Some(PathBuf::from(v)).filter(|p| p.is_absolute());
        let data = std::env::var_os("XDG_DATA_HOME")
            .and_then(absolute)
            .or_else(|| std::env::var_os("HOME").and_then(absolute).map(|h| h.join(".local/share")))?;
        Some(data.join("aicf").join("runs.sqlite"))
    }

    /// Why there is no default registry ([`Runs::default_path`] is
    /// `None`): `AICF_RUNS_DB=off`, or no home to put it in.
    pub fn no_default_reason() -> &'static str {
        match std::env::var_os("AICF_RUNS_DB") {
            Some(v) if v == "off" || v.is_empty() => "AICF_RUNS_DB is off",
            _ => {
                "neither HOME nor XDG_DATA_HOME is set to an absolute path (the registry's default place is under them)"
            }
        }
    }

    /// The files SQLite keeps beside the registry at `path` while it is
    /// written (its write-ahead log, shared memory, rollback journal):
    /// writing over one loses runs as surely as writing over the registry.
    pub fn companions(path: &Path) -> [PathBuf; 3] {
        ["-wal", "-shm", "-journal"].map(|suffix| {
            let mut name = path.as_os_str().to_owned();
            name.push(suffix);
            PathBuf::from(name)
        })
    }

    /// Whether writing `file` would write the registry at `registry` or
    /// one of its [`Runs::companions`].
    pub fn would_overwrite(file: &Path, registry: &Path) -> bool {
        super::same_path(file, registry) || Runs::companions(registry).iter().any(|c| super::same_path(file, c))
    }

    /// Refuses the SQLite file at `path` where it holds no run registry:
    /// another program's database (tables, but not the registry's `runs`
    /// with its schema version in `meta`), which opening would write the
    /// registry's schema into. Passes where it cannot tell (no file, an
    /// empty database, or one it cannot read without writing).
    pub fn refuse_foreign(path: &Path) -> Result<()> {
        let flags = rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let Ok(conn) = Connection::open_with_flags(path, flags) else { return Ok(()) };
        let tables: std::result::Result<Vec<String>, _> = conn
            .prepare("SELECT name FROM sqlite_master WHERE type = 'table'")
            .and_then(|mut q| q.query_map([], |r| r.get(0))?.collect());
        let Ok(tables) = tables else { return Ok(()) };
        if tables.is_empty() {
            return Ok(());
        }
        let has = |name: &str| tables.iter().any(|t| t == name);
        // The registry writes its schema version with its tables, in one
        // transaction (see `open`): a database with the tables and no
        // version is another program's.
        // (A version that does not read, a damaged page, cannot tell: the
        // registry's own reading says it is damaged.)
        let version = match has("meta")
            .then(|| {
                conn.query_row("SELECT value FROM meta WHERE key = 'schema'", [], |r| r.get::<_, String>(0)).optional()
            })
            .transpose()
        {
            Ok(v) => v.flatten(),
            Err(e) if e.sqlite_error_code() == Some(rusqlite::ErrorCode::DatabaseCorrupt) => return Ok(()),
            // (Another program's `meta`, of other columns: not the registry.)
            Err(_) => None,
        };
        if has("runs") && version.is_some() {
            return Ok(());
        }
        Err(TrainError::Io {
            path: path.to_path_buf(),
            message: "not an AICF run registry (another program's database: no AICF schema version in it); left as \
                      it is"
                .into(),
        })
    }

    /// A registry path that is a directory, or anything else that is not
    /// a file (`/dev/null`, a pipe): the error saying so. SQLite opened
    /// `/dev/null`, failed on it, and left `/dev/null-journal` beside it.
    fn refuse_directory(path: &Path) -> Result<()> {
        let message = match std::fs::metadata(path) {
            Ok(m) if m.is_dir() => "is a directory; the run registry is a file (such as DIR/runs.sqlite)",
            Ok(m) if !m.is_file() => {
                "is not a file (a device or a pipe); the run registry is a file, such as DIR/runs.sqlite (--no-runs-db \
                 or AICF_RUNS_DB=off records nothing)"
            }
            _ => return Ok(()),
        };
        Err(TrainError::Io { path: path.to_path_buf(), message: message.into() })
    }

    /// Opens (or creates) the database at `path`, to record runs. Refuses
    /// another program's database ([`Runs::refuse_foreign`]).
    pub fn open(path: &Path) -> Result<Runs> {
        Runs::refuse_directory(path)?;
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            super::run::create_dir(dir)?;
        }
        Runs::refuse_foreign(path)?;
        let err = db_error(path);
        let conn = Connection::open(path).map_err(&err)?;
        // Another run's write holds it for a moment; one that holds it
        // longer is waited for up to 30 s, said after the first second (a
        // run seemed to hang at its start).
        conn.busy_handler(Some(wait_for_registry)).map_err(&err)?;
        // WAL: a writer never blocks readers, and a process killed
        // mid-write leaves the last committed state.
        let _: String = conn.query_row("PRAGMA journal_mode=WAL", [], |r| r.get(0)).map_err(&err)?;
        // The tables and the schema version in one transaction: another
        // process never sees the tables without the version (which
        // `refuse_foreign` would take for another program's database).
        conn.execute_batch(&format!(
            "BEGIN IMMEDIATE; {SCHEMA} INSERT OR IGNORE INTO meta (key, value) VALUES ('schema', '{SCHEMA_VERSION}'); \
             COMMIT;"
        ))
        .map_err(&err)?;
        Runs::check_version(&conn, path, "writes")?;
        Ok(Runs { conn, path: path.to_path_buf() })
    }

    /// The registry's file opened without a write (its tables are not
    /// made): a run that found it locked at its start holds it so, and
    /// writes nothing through it ([`Runs::open`] at its end does).
    pub fn connect(path: &Path) -> Result<Runs> {
        Runs::refuse_directory(path)?;
        let conn = Connection::open(path).map_err(db_error(path))?;
        Ok(Runs { conn, path: path.to_path_buf() })
    }

    /// Refuses a registry of another schema version.
    fn check_version(conn: &Connection, path: &Path, does: &str) -> Result<()> {
        let version: Option<String> = conn
            .query_row("SELECT value FROM meta WHERE key = 'schema'", [], |r| r.get(0))
            .optional()
            .map_err(db_error(path))?;
        if version.as_deref() != Some(SCHEMA_VERSION) {
            return Err(TrainError::Io {
                path: path.to_path_buf(),
                message: format!(
                    "run registry schema {}; this AICF {does} {SCHEMA_VERSION}",
                    version.as_deref().unwrap_or("none")
                ),
            });
        }
        Ok(())
    }

    /// The registry at `path` for commands that only read it (`aicf runs`,
    /// `aicf propose`), opened without writing anything into it: `None`
    /// where there is none yet (no file, or an empty one). A path that
    /// cannot be looked at (permissions) is an error, never "no registry".
    /// On a read-only file or directory it is read read-only; where SQLite
    /// cannot read its write-ahead log there (runs a killed writer left in
    /// it), the error says so rather than reading the registry without
    /// them.
    pub fn read(path: &Path) -> Result<Option<Runs>> {
        let io = |message: String| TrainError::Io { path: path.to_path_buf(), message };
        let meta = match std::fs::metadata(path) {
            Ok(m) => m,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(io(format!("cannot look at the run registry: {e}"))),
        };
        Runs::refuse_directory(path)?;
        if meta.len() == 0 {
            return Ok(None);
        }
        Runs::refuse_foreign(path)?;
        let err = db_error(path);
        use rusqlite::OpenFlags as F;
        let open = |target: &str, flags: F| -> Result<Connection> {
            let conn = Connection::open_with_flags(target, flags | F::SQLITE_OPEN_NO_MUTEX).map_err(&err)?;
            conn.busy_timeout(std::time::Duration::from_secs(30)).map_err(&err)?;
            Runs::check_version(&conn, path, "reads")?;
            Ok(conn)
        };
        let name = path.to_string_lossy();
        // Without SQLITE_OPEN_CREATE: nothing is created where nothing is.
        let first = match open(&name, F::SQLITE_OPEN_READ_WRITE) {
            Ok(conn) => return Ok(Some(Runs { conn, path: path.to_path_buf() })),
            Err(e) => e,
        };
        // Another process holds it locked past the wait: an error. Read
        // read-only, then as immutable, it was read without the lock, so
        // with that process's uncommitted changes, and said nothing.
        if is_locked(&first.to_string()) {
            return Err(io("another process holds the run registry locked (database is locked, for more than 30 s); \
                           try again when it is done"
                .into()));
        }
        if let Ok(conn) = open(&name, F::SQLITE_OPEN_READ_ONLY) {
            return Ok(Some(Runs { conn, path: path.to_path_buf() }));
        }
        let [wal, ..] = Runs::companions(path);
        if std::fs::metadata(&wal).is_ok_and(|m| m.len() > 0) {
            return Err(io(format!(
                "cannot be read here: {} holds runs not yet merged into it, which SQLite reads only where it can \
                 write beside them (copy the registry and that file to a writable directory); first error: {first}",
                wal.display()
            )));
        }
        // Immutable: read as the file is (no write-ahead log to merge),
        // with no locking, which a read-only place cannot hold. A URI's
        // path: '%', '?' and '#' escaped.
        let escaped = name.replace('%', "%25").replace('?', "%3F").replace('#', "%23");
        match open(&format!("file:{escaped}?immutable=1"), F::SQLITE_OPEN_READ_ONLY | F::SQLITE_OPEN_URI) {
            Ok(conn) => Ok(Some(Runs { conn, path: path.to_path_buf() })),
            // The first error says why it could not be opened as usual.
            Err(_) => Err(first),
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Records a run that starts; returns its id.
    pub fn begin(&self, run: &NewRun) -> Result<i64> {
        let json = |v: &dyn erased::Json| v.json();
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default().trim().to_string();
        self.conn
            .execute(
                // (Past every id a deletion removed: one statement, so two
                // runs starting at once never take one id.)
                "INSERT INTO runs (id, started, status, pid, host, command, model, model_hash, graph_hash, \
                 fingerprint, problem, settings, data, seed) VALUES (MAX(COALESCE((SELECT MAX(id) FROM runs), 0), \
                 COALESCE((SELECT CAST(value AS INTEGER) FROM meta WHERE key = 'deleted_through'), 0)) + 1, ?1, \
                 'running', ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)",
                params![
                    run.started.clone().unwrap_or_else(now),
                    std::process::id(),
                    host,
                    run.command,
                    run.model,
                    run.model_hash,
                    run.fingerprint.graph_hash,
                    json(&run.fingerprint),
                    json(&run.problem),
                    json(&run.settings),
                    run.data,
                    run.seed as i64,
                ],
            )
            .map_err(db_error(&self.path))?;
        Ok(self.conn.last_insert_rowid())
    }

    /// Continues run `id` (a resumed run's, killed or ended before) where
    /// the registry holds it with the model `row_model` (the hash of its
    /// last part's model) and seed: it is running again, in this process,
    /// with the model `model_hash` (the same, or retargeted to another
    /// batch by --batch). Whether it did (a registry made anew
    /// since reuses ids: another run's row is left alone).
    ///
    /// Its settings become `settings` (the epochs it now trains to, a
    /// policy given with --override-resume), keeping the policy it had
    /// where this part gives none (its growth is in its decisions), and
    /// `command` is added to its commands, one a line.
    ///
    /// `identity`: the row's [`Runs::identity_of`] as the checkpoint
    /// recorded it (absent in older checkpoints): a row of that id of
    /// another identity is another run's (an AICF before `aicf runs
    /// delete` gave a deleted run's id again).
    #[allow(clippy::too_many_arguments)]
    pub fn resume(
        &self,
        id: i64,
        row_model: &str,
        identity: Option<&str>,
        model_hash: &str,
        seed: u64,
        settings: &Settings,
        command: &str,
    ) -> Result<bool> {
        let before: Option<String> = self
            .conn
            .query_row(
                "SELECT settings FROM runs WHERE id = ?1 AND model_hash = ?2 AND seed = ?3",
                params![id, row_model, seed as i64],
                |r| r.get(0),
            )
            .optional()
            .map_err(db_error(&self.path))?;
        let Some(before) = before else { return Ok(false) };
        if let Some(identity) = identity
            && self.identity_of(id).as_deref() != Some(identity)
        {
            return Ok(false);
        }
        let mut settings = settings.clone();
        let old = serde_json::from_str::<Settings>(&before).ok();
        // A copy of the run's checkpoint directory resumed: a run of its own.
        if let Some(old) = &old
            && let (Some(was), Some(now)) = (&old.checkpoint_dir, &settings.checkpoint_dir)
            && was != now
        {
            return Ok(false);
        }
        if let Some(old) = old
            && settings.policy.is_none()
        {
            (settings.policy, settings.policy_grows) = (old.policy, old.policy_grows);
        }
        let updated = self
            .conn
            .execute(
                "UPDATE runs SET status = 'running', pid = ?2, finished = NULL, error = NULL, settings = ?5, command \
                 = COALESCE(command || char(10), '') || ?6, model_hash = ?7 WHERE id = ?1 AND model_hash = ?3 AND \
                 seed = ?4",
                params![
                    id,
                    std::process::id(),
                    row_model,
                    seed as i64,
                    serde_json::to_string(&settings).unwrap_or_else(|_| before.clone()),
                    command,
                    model_hash
                ],
            )
            .map_err(db_error(&self.path))?;
        Ok(updated == 1)
    }

    /// Records an epoch's numbers (the held-out loss against FLOPs).
    pub fn epoch(&self, id: i64, r: &EpochRecord) -> Result<()> {
        self.conn
            .execute(
                "INSERT OR REPLACE INTO curve (run_id, epoch, step, train_flops, train_loss, val_loss, val_accuracy, \
                 params, seconds) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
                params![
                    id,
                    r.epoch as i64,
                    r.step as i64,
                    r.train_flops,
                    finite(r.train_loss),
                    finite(r.val_loss),
                    finite(r.val_accuracy),
                    r.params as i64,
                    r.seconds
                ],
            )
            .map_err(db_error(&self.path))?;
        Ok(())
    }

    /// Records a growth decision. One recorded before, the same decision
    /// (its step and action), keeps its IR where this record has none: a
    /// resumed run records again the decisions its checkpoint carries,
    /// without the IR their own process saw (it blanked them). A replay
    /// that decided otherwise at that place replaces it whole.
    pub fn decision(&self, id: i64, seq: usize, d: &DecisionRecord) -> Result<()> {
        self.conn
            .execute(
                "INSERT INTO decisions (run_id, seq, step, epoch, trigger, action, outcome, reason, \
                 params_before, params_after, loss_before, loss_after, ir_before, ir_after) VALUES (?1, ?2, ?3, ?4, \
                 ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14) ON CONFLICT (run_id, seq) DO UPDATE SET step = \
                 excluded.step, epoch = excluded.epoch, trigger = excluded.trigger, action = excluded.action, outcome \
                 = excluded.outcome, reason = excluded.reason, params_before = excluded.params_before, params_after \
                 = excluded.params_after, loss_before = excluded.loss_before, loss_after = excluded.loss_after, \
                 ir_before = CASE WHEN excluded.ir_before = '' AND decisions.step = excluded.step AND \
                 decisions.action = excluded.action THEN decisions.ir_before ELSE excluded.ir_before END, ir_after = \
                 CASE WHEN excluded.ir_after = '' AND decisions.step = excluded.step AND decisions.action = \
                 excluded.action THEN decisions.ir_after ELSE excluded.ir_after END",
                params![
                    id,
                    seq as i64,
                    d.step as i64,
                    d.epoch as i64,
                    d.trigger,
                    d.action,
                    d.outcome,
                    d.reason,
                    d.params_before as i64,
                    d.params_after as i64,
                    d.loss_before,
                    d.loss_after,
                    d.ir_before,
                    d.ir_after
                ],
            )
            .map_err(db_error(&self.path))?;
        Ok(())
    }

    /// Records how a run ended, from its epochs (`records`). Its best
    /// held-out loss is of the epochs its row holds: a run resumed in a row
    /// of its own (a fork, other data) carries its parent's records, whose
    /// best was credited to it; not of the epochs past its last, which an
    /// in-place resume from an earlier checkpoint that stopped sooner left.
    pub fn finish(&self, id: i64, records: &[EpochRecord], steps: u64, seconds: f64) -> Result<()> {
        let best = records.iter().map(|r| r.val_loss).filter(|v| v.is_finite()).fold(f64::INFINITY, f64::min);
        let last = records.last();
        self.conn
            .execute(
                "UPDATE runs SET finished = ?2, status = 'finished', epochs = ?3, steps = ?4, train_flops = ?5, \
                 params = ?6, best_val_loss = COALESCE((SELECT MIN(val_loss) FROM curve WHERE run_id = ?1 AND epoch <= ?3), ?7), \
                 final_val_loss = ?8, final_val_accuracy = ?9, seconds = ?10 WHERE id = ?1",
                params![
                    id,
                    now(),
                    last.map(|r| r.epoch as i64),
                    steps as i64,
                    last.map(|r| r.train_flops),
                    last.map(|r| r.params as i64),
                    finite(best),
                    last.and_then(|r| finite(r.val_loss)),
                    last.and_then(|r| finite(r.val_accuracy)),
                    seconds
                ],
            )
            .map_err(db_error(&self.path))?;
        Ok(())
    }

    /// Records the structure a run ended with (grown, or as it started).
    pub fn final_structure(&self, id: i64, f: &Fingerprint) -> Result<()> {
        let text = serde_json::to_string(f).unwrap_or_else(|_| "{}".into());
        self.conn
            .execute("UPDATE runs SET final_fingerprint = ?2 WHERE id = ?1", params![id, text])
            .map_err(db_error(&self.path))?;
        Ok(())
    }

    /// Records that a run was interrupted (a Ctrl-C or SIGTERM: resumable, not
    /// failed), with `message`, its numbers from the epochs it recorded.
    pub fn interrupt(&self, id: i64, message: &str, seconds: f64) -> Result<()> {
        self.mark_interrupted(id, message, seconds, "").map(|_| ())
    }

    /// [`Runs::interrupt`] where run `id` is still recorded as running (a run
    /// whose processes were ended without a word: `aicf train --nproc`'s
    /// ranks, which mpirun stops); says whether it was.
    pub fn interrupt_unfinished(&self, id: i64, message: &str, seconds: f64) -> Result<bool> {
        Ok(self.mark_interrupted(id, message, seconds, " AND status = 'running'")? > 0)
    }

    fn mark_interrupted(&self, id: i64, message: &str, seconds: f64, only: &str) -> Result<usize> {
        self.conn
            .execute(
                &format!(
                    "UPDATE runs SET finished = ?2, status = 'interrupted', error = ?3, seconds = ?4, \
                 epochs = (SELECT MAX(epoch) FROM curve WHERE run_id = ?1), \
                 steps = (SELECT step FROM curve WHERE run_id = ?1 ORDER BY epoch DESC LIMIT 1), \
                 train_flops = (SELECT train_flops FROM curve WHERE run_id = ?1 ORDER BY epoch DESC LIMIT 1), \
                 params = (SELECT params FROM curve WHERE run_id = ?1 ORDER BY epoch DESC LIMIT 1), \
                 best_val_loss = (SELECT MIN(val_loss) FROM curve WHERE run_id = ?1), \
                 final_val_loss = (SELECT val_loss FROM curve WHERE run_id = ?1 ORDER BY epoch DESC LIMIT 1), \
                 final_val_accuracy = (SELECT val_accuracy FROM curve WHERE run_id = ?1 ORDER BY epoch DESC LIMIT 1) \
                 WHERE id = ?1{only}"
                ),
                params![id, now(), message, seconds],
            )
            .map_err(db_error(&self.path))
    }

    /// Records that a run stopped on `error`.
    pub fn fail(&self, id: i64, error: &str) -> Result<()> {
        self.conn
            .execute(
                "UPDATE runs SET finished = ?2, status = 'failed', error = ?3 WHERE id = ?1",
                params![id, now(), error],
            )
            .map_err(db_error(&self.path))?;
        Ok(())
    }

    /// Whether the registry has table `name` (one written by an earlier
    /// AICF lacks the later tables until a run writes to it).
    fn has_table(&self, name: &str) -> Result<bool> {
        self.conn
            .query_row("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?1", [name], |_| Ok(()))
            .optional()
            .map(|found| found.is_some())
            .map_err(db_error(&self.path))
    }

    /// Runs `f` in one transaction that holds the write lock from its
    /// start (its reads and writes see one state), rolled back on an error.
    fn immediate<T>(&self, f: impl FnOnce() -> Result<T>) -> Result<T> {
        self.conn.execute_batch("BEGIN IMMEDIATE").map_err(db_error(&self.path))?;
        match f() {
            Ok(v) => {
                self.conn.execute_batch("COMMIT").map_err(db_error(&self.path))?;
                Ok(v)
            }
            Err(e) => {
                let _ = self.conn.execute_batch("ROLLBACK");
                Err(e)
            }
        }
    }

    /// What tells run `id`'s row from another's of its id: when it started
    /// and a hash of its first command (both kept for the row's life; two
    /// runs start within one second).
    pub fn identity_of(&self, id: i64) -> Option<String> {
        let (started, command): (String, Option<String>) = self
            .conn
            .query_row("SELECT started, command FROM runs WHERE id = ?1", [id], |r| Ok((r.get(0)?, r.get(1)?)))
            .ok()?;
        let first = command.unwrap_or_default().lines().next().unwrap_or_default().to_string();
        // FNV-1a: stable across builds (std's hasher is not promised to be).
        let hash = first.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ b as u64).wrapping_mul(0x100_0000_01b3));
        Some(format!("{started} {hash:016x}"))
    }

    /// Whether run `id` is in the registry (`false` also where it cannot
    /// be read).
    pub fn has_run(&self, id: i64) -> bool {
        self.known(id).is_ok()
    }

    /// An error unless run `id` is in the registry.
    fn known(&self, id: i64) -> Result<()> {
        let found = self
            .conn
            .query_row("SELECT 1 FROM runs WHERE id = ?1", [id], |_| Ok(()))
            .optional()
            .map_err(db_error(&self.path))?;
        match found {
            Some(()) => Ok(()),
            None => Err(TrainError::Io { path: self.path.clone(), message: format!("run registry: no run {id}") }),
        }
    }

    /// Gives run `id` the tags `tags` (or takes them from it: `remove`);
    /// returns its tags after. A tag is a word of up to 64 characters
    /// without spaces or commas (`baseline`, `lr-sweep`, `v2.1`).
    pub fn tag(&self, id: i64, tags: &[String], remove: bool) -> Result<Vec<String>> {
        for t in tags {
            check_tag(t).map_err(|message| TrainError::Io { path: self.path.clone(), message })?;
        }
        let err = db_error(&self.path);
        self.immediate(|| {
            self.known(id)?;
            for t in tags {
                let sql = if remove {
                    "DELETE FROM tags WHERE run_id = ?1 AND tag = ?2"
                } else {
                    "INSERT OR IGNORE INTO tags (run_id, tag) VALUES (?1, ?2)"
                };
                self.conn.execute(sql, params![id, t]).map_err(&err)?;
            }
            let mut stmt = self.conn.prepare("SELECT tag FROM tags WHERE run_id = ?1 ORDER BY tag").map_err(&err)?;
            let now = stmt.query_map([id], |r| r.get(0)).map_err(&err)?.collect::<rusqlite::Result<Vec<String>>>();
            now.map_err(&err)
        })
    }

    /// Sets run `id`'s note (`None`: takes it away).
    pub fn note(&self, id: i64, note: Option<&str>) -> Result<()> {
        let err = db_error(&self.path);
        self.immediate(|| {
            self.known(id)?;
            match note {
                Some(n) => {
                    self.conn.execute("INSERT OR REPLACE INTO notes (run_id, note) VALUES (?1, ?2)", params![id, n])
                }
                None => self.conn.execute("DELETE FROM notes WHERE run_id = ?1", [id]),
            }
            .map_err(&err)?;
            Ok(())
        })
    }

    /// Deletes the runs `ids` with their curves, decisions, tags and notes,
    /// all or none (one transaction). A run recorded as running whose
    /// process is alive (or on another machine, where it cannot be told)
    /// is refused unless `force`. Their ids are not given again. Returns
    /// each run's checkpoint directory, where it recorded one (the files
    /// are left).
    pub fn delete(&self, ids: &[i64], force: bool) -> Result<Vec<(i64, Option<String>)>> {
        let err = db_error(&self.path);
        let this_host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default().trim().to_string();
        self.immediate(|| {
            let mut out = Vec::new();
            // (A registry of an earlier AICF has no tags or notes tables.)
            let mut tables = vec!["curve", "decisions"];
            for t in ["tags", "notes"] {
                if self.has_table(t)? {
                    tables.push(t);
                }
            }
            for &id in ids {
                self.known(id)?;
                let (status, pid, host, started, settings): (String, Option<i64>, Option<String>, String, String) =
                    self.conn
                        .query_row("SELECT status, pid, host, started, settings FROM runs WHERE id = ?1", [id], |r| {
                            Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?))
                        })
                        // (A row too damaged to read this is deleted as it is.)
                        .unwrap_or_else(|_| ("?".into(), None, None, String::new(), String::new()));
                if status == "running" && !force && !process_gone(pid, host.as_deref(), &this_host, &started) {
                    let whose = match (pid, host.as_deref()) {
                        (Some(p), Some(h)) if h == this_host => format!("process {p} is still running it"),
                        (Some(p), Some(h)) => format!("process {p} on {h} records it as running"),
                        _ => "it is recorded as running".into(),
                    };
                    return Err(TrainError::Io {
                        path: self.path.clone(),
                        message: format!("run {id}: {whose}; stop it first, or delete it with --force"),
                    });
                }
                let dir = serde_json::from_str::<Settings>(&settings).ok().and_then(|s| s.checkpoint_dir);
                for table in &tables {
                    self.conn.execute(&format!("DELETE FROM {table} WHERE run_id = ?1"), [id]).map_err(&err)?;
                }
                self.conn.execute("DELETE FROM runs WHERE id = ?1", [id]).map_err(&err)?;
                out.push((id, dir));
            }
            if let Some(highest) = ids.iter().max() {
                self.conn
                    .execute(
                        "INSERT INTO meta (key, value) VALUES ('deleted_through', ?1) ON CONFLICT(key) DO UPDATE SET \
                         value = MAX(CAST(value AS INTEGER), CAST(excluded.value AS INTEGER))",
                        [highest.to_string()],
                    )
                    .map_err(&err)?;
            }
            Ok(out)
        })
    }

    /// Every run, oldest first.
    pub fn list(&self) -> Result<Vec<RunRow>> {
        self.rows(None)
    }

    /// Every run that reads, and the error of each that does not (a row
    /// damaged by hand or by another program): one bad row made the whole
    /// registry unreadable to `aicf runs list` and `aicf propose`. Where no
    /// row reads, the first error is the error.
    pub fn list_readable(&self) -> Result<(Vec<RunRow>, Vec<TrainError>)> {
        let (rows, mut errors) = self.each_row(None)?;
        if rows.is_empty() && !errors.is_empty() {
            return Err(errors.swap_remove(0));
        }
        Ok((rows, errors))
    }

    /// Every run, or run `id` alone: an error where one does not read.
    fn rows(&self, id: Option<i64>) -> Result<Vec<RunRow>> {
        let (rows, errors) = self.each_row(id)?;
        match errors.into_iter().next() {
            Some(e) => Err(e),
            None => Ok(rows),
        }
    }

    /// Every run (or run `id` alone) that reads, and the error of each
    /// that does not.
    fn each_row(&self, id: Option<i64>) -> Result<(Vec<RunRow>, Vec<TrainError>)> {
        let err = db_error(&self.path);
        let mut stmt = self
            .conn
            .prepare(&format!(
                // A run that has not finished (running, killed, interrupted,
                // failed) has no totals yet: its curve's, as far as it went.
                "SELECT id, started, status, pid, host, model, problem, fingerprint, settings, \
                 COALESCE(epochs, (SELECT MAX(epoch) FROM curve WHERE run_id = runs.id)) AS epochs, \
                 COALESCE(steps, (SELECT MAX(step) FROM curve WHERE run_id = runs.id)) AS steps, \
                 COALESCE(train_flops, (SELECT MAX(train_flops) FROM curve WHERE run_id = runs.id)) AS train_flops, \
                 COALESCE(best_val_loss, (SELECT MIN(val_loss) FROM curve WHERE run_id = runs.id)) AS best_val_loss, \
                 final_val_loss, final_val_accuracy, seconds, error, final_fingerprint, {tags} AS tags, \
                 {note} AS note FROM runs WHERE ?1 IS NULL OR id = ?1 ORDER BY id",
                // (A registry written before tags and notes, read without
                // a write, has neither table.)
                tags = if self.has_table("tags")? {
                    "(SELECT group_concat(tag, char(10)) FROM tags WHERE run_id = runs.id)"
                } else {
                    "NULL"
                },
                note =
                    if self.has_table("notes")? { "(SELECT note FROM notes WHERE run_id = runs.id)" } else { "NULL" },
            ))
            .map_err(&err)?;
        let this_host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default().trim().to_string();
        let rows = stmt
            .query_map([id], |r| {
                let status: String = r.get(2)?;
                let pid: Option<i64> = r.get(3)?;
                let host: Option<String> = r.get(4)?;
                // A run recorded as running by a process of this machine
                // that no longer exists was killed; so was one whose
                // process id another process has now, started after the
                // run did (ids are reused: after a reboot, in a container,
                // a killed run read as running for ever).
                let started: String = r.get(1)?;
                let gone = process_gone(pid, host.as_deref(), &this_host, &started);
                let status = if status == "running" && gone { "unfinished".to_string() } else { status };
                let id: i64 = r.get(0)?;
                // A malformed row is an error that names its run.
                let r = Named { row: r, id };
                let parse = |i: usize| -> rusqlite::Result<String> { r.get(i) };
                // A record whose JSON does not read is an error naming the
                // column, never a blank record (fields added since it was
                // written read as their defaults).
                fn json<T: serde::de::DeserializeOwned>(id: i64, what: &str, text: &str) -> rusqlite::Result<T> {
                    serde_json::from_str(text)
                        .map_err(|e| malformed(format!("run {id}'s {what} does not read as JSON ({e})")))
                }
                Ok(RunRow {
                    id,
                    started: r.get(1)?,
                    status,
                    model: r.get::<Option<String>>(5)?.unwrap_or_default(),
                    problem: json(id, "problem", &parse(6)?)?,
                    fingerprint: json(id, "fingerprint", &parse(7)?)?,
                    settings: json(id, "settings", &parse(8)?)?,
                    epochs: r.get(9)?,
                    steps: r.get(10)?,
                    train_flops: r.get(11)?,
                    best_val_loss: r.get(12)?,
                    final_val_loss: r.get(13)?,
                    final_val_accuracy: r.get(14)?,
                    seconds: r.get(15)?,
                    error: r.get(16)?,
                    final_fingerprint: r
                        .get::<Option<String>>(17)?
                        .map(|t| json(id, "final fingerprint", &t))
                        .transpose()?,
                    tags: {
                        let mut tags: Vec<String> = r
                            .get::<Option<String>>(18)?
                            .map(|t| t.lines().map(str::to_string).collect())
                            .unwrap_or_default();
                        tags.sort();
                        tags
                    },
                    note: r.get(19)?,
                })
            })
            .map_err(&err)?;
        let (mut read, mut errors) = (Vec::new(), Vec::new());
        for row in rows {
            match row {
                Ok(r) => read.push(r),
                Err(e) => errors.push(err(e)),
            }
        }
        Ok((read, errors))
    }

    /// Run `id` with its curve and decisions.
    pub fn get(&self, id: i64) -> Result<RunDetail> {
        let err = db_error(&self.path);
        let run = self
            .rows(Some(id))?
            .pop()
            .ok_or_else(|| TrainError::Io { path: self.path.clone(), message: format!("run registry: no run {id}") })?;
        let (command, data, seed): (Option<String>, Option<String>, Option<i64>) = self
            .conn
            .query_row("SELECT command, data, seed FROM runs WHERE id = ?1", [id], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?))
            })
            .map_err(&err)?;
        let mut stmt = self
            .conn
            .prepare(
                "SELECT epoch, step, train_flops, train_loss, val_loss, val_accuracy FROM curve WHERE run_id = ?1 \
                 ORDER BY epoch",
            )
            .map_err(&err)?;
        let curve = stmt
            .query_map([id], |r| {
                let r = Named { row: r, id };
                Ok(CurvePoint {
                    epoch: r.get(0)?,
                    step: r.get(1)?,
                    train_flops: r.get::<Option<f64>>(2)?.unwrap_or(0.0),
                    train_loss: r.get::<Option<f64>>(3)?.unwrap_or(f64::NAN),
                    val_loss: r.get(4)?,
                    val_accuracy: r.get(5)?,
                })
            })
            .map_err(&err)?
            .collect::<rusqlite::Result<Vec<_>>>()
            .map_err(&err)?;
        let mut stmt = self
            .conn
            .prepare(
                "SELECT step, epoch, trigger, action, outcome, reason, params_before, params_after, loss_before, \
                 loss_after, ir_before, ir_after FROM decisions WHERE run_id = ?1 ORDER BY seq",
            )
            .map_err(&err)?;
        let decisions = stmt
            .query_map([id], |r| {
                let r = Named { row: r, id };
                Ok(DecisionRecord {
                    step: r.get(0)?,
                    epoch: r.get(1)?,
                    trigger: r.get::<Option<String>>(2)?.unwrap_or_default(),
                    action: r.get::<Option<String>>(3)?.unwrap_or_default(),
                    outcome: r.get::<Option<String>>(4)?.unwrap_or_default(),
                    reason: r.get::<Option<String>>(5)?.unwrap_or_default(),
                    params_before: r.get(6)?,
                    params_after: r.get(7)?,
                    loss_before: r.get(8)?,
                    loss_after: r.get(9)?,
                    ir_before: r.get::<Option<String>>(10)?.unwrap_or_default(),
                    ir_after: r.get::<Option<String>>(11)?.unwrap_or_default(),
                })
            })
            .map_err(&err)?
            .collect::<rusqlite::Result<Vec<_>>>()
            .map_err(&err)?;
        Ok(RunDetail {
            run,
            command: command.unwrap_or_default(),
            data: data.unwrap_or_default(),
            seed: seed.unwrap_or_default(),
            curve,
            decisions,
        })
    }

    /// `aicf runs check` of the registry at `path`: SQLite's integrity
    /// check of its pages and every run read as `runs show` reads it, on a
    /// damaged file too (where opening it as the other commands do stops at
    /// the first page that does not read). `None` where there is no
    /// registry (no file, or an empty one); an error for a file that is no
    /// registry (another schema, another kind of file, a directory).
    pub fn check(path: &Path) -> Result<Option<Checked>> {
        Runs::refuse_directory(path)?;
        // Opened as the other commands open it (a read-only place, a lock,
        // a write-ahead log there); only a damaged file is opened plainly,
        // to read what still reads.
        let (conn, opens) = match Runs::read(path) {
            Ok(None) => return Ok(None),
            Ok(Some(runs)) => (runs.conn, Ok(())),
            Err(e) if e.to_string().contains(DAMAGED) => {
                use rusqlite::OpenFlags as F;
                let conn = Connection::open_with_flags(path, F::SQLITE_OPEN_READ_ONLY | F::SQLITE_OPEN_NO_MUTEX)
                    .map_err(db_error(path))?;
                let _ = conn.busy_timeout(std::time::Duration::from_secs(30));
                (conn, Err(plain(&e)))
            }
            Err(e) => return Err(e),
        };
        // (Another schema's registry was refused by `read`, whose version
        // check reads it first; a version that does not read is damage.)
        // Its findings up to the first page it cannot read, then that.
        let mut pages = Vec::new();
        let checked = conn.prepare("PRAGMA integrity_check").and_then(|mut stmt| {
            for row in stmt.query_map([], |r| r.get::<_, String>(0))? {
                pages.push(row?);
            }
            Ok(())
        });
        match checked {
            // Not an SQLite file at all: no registry, as the others say.
            Err(e) if e.sqlite_error_code() == Some(rusqlite::ErrorCode::NotADatabase) => {
                return Err(db_error(path)(e));
            }
            Err(e) => pages.push(format!("it reads no further: {e}")),
            Ok(()) if pages == ["ok"] => pages.clear(),
            Ok(()) => {}
        }
        // (An error here is SQLite's alone: the advice is this check's.)
        let own = |e: TrainError| TrainError::Io { path: path.to_path_buf(), message: plain(&e) };
        let runs = Runs { conn, path: path.to_path_buf() };
        let read = match runs.check_runs() {
            Ok((count, unreadable)) => Ok((count, unreadable.into_iter().map(own).collect())),
            Err(e) => Err(plain(&e)),
        };
        // (Opened, it also lists: what `aicf runs list` reads.)
        let opens = opens.and_then(|()| runs.list_readable().map(|_| ()).map_err(|e| plain(&e)));
        Ok(Some(Checked { pages, read, opens }))
    }

    /// Every run read as `runs show` reads it: the runs read, and an error
    /// for each run that does not read (a value of the wrong type, JSON
    /// that does not parse).
    pub fn check_runs(&self) -> Result<(usize, Vec<TrainError>)> {
        let err = db_error(&self.path);
        let mut stmt = self.conn.prepare("SELECT id FROM runs ORDER BY id").map_err(&err)?;
        let ids = stmt
            .query_map([], |r| r.get::<_, i64>(0))
            .map_err(&err)?
            .collect::<rusqlite::Result<Vec<_>>>()
            .map_err(&err)?;
        // (An error of SQLite's own, a damaged page, is given its run.)
        let errors: Vec<TrainError> = ids
            .iter()
            .filter_map(|&id| match self.get(id) {
                Err(TrainError::Io { path, message }) if !message.contains(&format!("run {id}'s")) => {
                    Some(TrainError::Io { path, message: format!("run {id} does not read: {message}") })
                }
                other => other.err(),
            })
            .collect();
        Ok((ids.len(), errors))
    }
}

/// An error's message without the damaged registry's advice.
fn plain(e: &TrainError) -> String {
    match e {
        TrainError::Io { message, .. } => message.replace(DAMAGED, ""),
        e => e.to_string(),
    }
}

/// What `aicf runs check` found ([`Runs::check`]).
pub struct Checked {
    /// SQLite's integrity check's findings, empty where the pages are
    /// whole.
    pub pages: Vec<String>,
    /// The runs it holds and an error for each that does not read; or why
    /// the runs could not even be listed.
    pub read: std::result::Result<(usize, Vec<TrainError>), String>,
    /// Whether the other commands open it (`runs list`, `propose`), or why
    /// they stop (a damaged page they read first).
    pub opens: std::result::Result<(), String>,
}

/// A row of run `id`'s records: reading a value of the wrong type is an
/// error that names the run and the column.
struct Named<'r, 's> {
    row: &'r rusqlite::Row<'s>,
    id: i64,
}

impl Named<'_, '_> {
    fn get<T: rusqlite::types::FromSql>(&self, i: usize) -> rusqlite::Result<T> {
        self.row.get(i).map_err(|e| {
            let column = self.row.as_ref().column_name(i).map_or_else(|_| format!("column {i}"), str::to_string);
            match e {
                rusqlite::Error::InvalidColumnType(_, _, ty) => malformed(format!(
                    "run {}'s {column} holds a value of type {ty}, not what was recorded there",
                    self.id
                )),
                rusqlite::Error::IntegralValueOutOfRange(..) => {
                    malformed(format!("run {}'s {column} is out of range", self.id))
                }
                e => malformed(format!("run {}'s {column}: {e}", self.id)),
            }
        })
    }
}

/// A registry row that does not read: `why` names the run and the column.
fn malformed(why: String) -> rusqlite::Error {
    // (Shown as its message alone.)
    rusqlite::Error::ToSqlConversionFailure(why.into())
}

/// Serialising the records' parts to JSON text.
mod erased {
    pub trait Json {
        fn json(&self) -> String;
    }
    impl<T: serde::Serialize> Json for T {
        fn json(&self) -> String {
            serde_json::to_string(self).unwrap_or_else(|_| "{}".into())
        }
    }
}

/// The structure of the model `source` (its IR), with the train step's
/// FLOPs `flops_per_step`.
pub fn fingerprint(source: &str, name: &str, flops_per_step: f64) -> Result<Fingerprint> {
    use crate::ir::{self, op_name, ops_of};
    let ctx = crate::CompilerContext::new();
    let module = ctx.parse(source, name)?;
    let raw = melior::ir::operation::OperationLike::to_raw(&module.as_operation());
    let body = unsafe { mlir_sys::mlirRegionGetFirstBlock(mlir_sys::mlirOperationGetRegion(raw, 0)) };
    let mut fp = Fingerprint { flops_per_step, ..Fingerprint::default() };
    // Symbols by declaration: their shapes; names become positions.
    let mut positions: BTreeMap<String, usize> = BTreeMap::new();
    let mut weights: Vec<(String, Vec<usize>)> = Vec::new();
    for op in ops_of(body) {
        let kind = op_name(op);
        if kind != "hl.param" && kind != "hl.state" {
            continue;
        }
        let sym = ir::string_attr(op, "sym_name").unwrap_or_default();
        positions.insert(sym.clone(), positions.len());
        if kind == "hl.param" {
            let t = unsafe { mlir_sys::mlirTypeAttrGetValue(ir::attr(op, "type")) };
            let spec = crate::nn::spec_of_type(t).map_err(|e| TrainError::Input(format!("{name}: {e}")))?;
            fp.params += spec.num_elements();
            if spec.shape.len() >= 2 {
                weights.push((sym, spec.shape.clone()));
            }
        }
    }
    fp.depth = weights.len();
    fp.widths = weights.iter().map(|(_, s)| s[0]).collect();
    for (func, block) in ir::functions(raw) {
        if ir::string_attr(func, "sym_name").as_deref() != Some("forward") {
            continue;
        }
        for op in ops_of(block) {
            *fp.ops.entry(op_name(op)).or_default() += 1;
        }
    }
    let has = |op: &str| fp.ops.contains_key(op);
    fp.kind = if has("hl.attention") {
        "transformer"
    } else if has("hl.conv2d") {
        "cnn"
    } else if has("hl.linear") || has("hl.matmul") {
        "mlp"
    } else {
        "other"
    }
    .into();
    fp.structure = match fp.kind.as_str() {
        "mlp" if fp.widths.len() > 1 => {
            let hidden: Vec<String> = fp.widths[..fp.widths.len() - 1].iter().map(usize::to_string).collect();
            format!("mlp {}", hidden.join("-"))
        }
        "mlp" => "mlp linear".into(),
        "transformer" => {
            // Blocks: attention ops; width: the token embedding's.
            let dim = weights.first().map_or(0, |(_, s)| s[1]);
            format!("lm {}x{dim}", fp.ops.get("hl.attention").copied().unwrap_or(0))
        }
        _ => String::new(),
    };
    // The module with every symbol renamed by its position and no owners,
    // printed: models that differ only in names hash alike.
    let ctx_raw = unsafe { mlir_sys::mlirOperationGetContext(raw) };
    let set = |op: mlir_sys::MlirOperation, key: &str, text: &str| -> Result<()> {
        let a = ir::parse_attribute(ctx_raw, text).map_err(|e| TrainError::Input(format!("{name}: {e:?}")))?;
        unsafe { mlir_sys::mlirOperationSetAttributeByName(op, crate::ffi::string_ref(key), a) };
        Ok(())
    };
    let renamed = |sym: &str| positions.get(sym).map(|p| format!("s{p}"));
    for op in ops_of(body) {
        if matches!(op_name(op).as_str(), "hl.param" | "hl.state") {
            if let Some(n) = ir::string_attr(op, "sym_name").and_then(|s| renamed(&s)) {
                set(op, "sym_name", &format!("\"{n}\""))?;
            }
            if ir::has(op, "owner") {
                set(op, "owner", "\"\"")?;
            }
            if let Some(n) = ir::flat_symbol(op, "param").and_then(|s| renamed(&s)) {
                set(op, "param", &format!("@{n}"))?;
            }
        }
    }
    for (_, block) in ir::functions(raw) {
        for op in ops_of(block) {
            if let Some(n) = ir::flat_symbol(op, "name").and_then(|s| renamed(&s)) {
                set(op, "name", &format!("@{n}"))?;
            }
        }
    }
    let text = crate::pipeline::identity_text(&crate::pipeline::canonical_text(&module));
    fp.graph_hash = aicf_runtime::artifact::ir_hash(&text);
    Ok(fp)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A recorded time reads back to its seconds, and a process's start is
    /// read from /proc: this test's own started before now and after the
    /// machine booted; pid 1 (started at boot) before a run of today, so a
    /// run recorded as pid 1's, started later, is not taken for it.
    #[test]
    fn a_reused_process_id_is_told_from_the_runs_process() {
        let t = now();
        let secs = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() as i64;
        assert!((epoch_seconds(&t).unwrap() - secs).abs() <= 1, "{t}");
        assert_eq!(epoch_seconds("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(epoch_seconds("2000-03-01T12:00:00Z"), Some(951_912_000));
        assert_eq!(epoch_seconds("2026-12-07"), None);
        if Path::new("/proc/self/stat").exists() {
            let me = process_started(std::process::id() as i64).unwrap();
            assert!(me <= secs + 2, "this process started at {me}, now is {secs}");
            assert!(process_started(1).unwrap() <= me);
        }
    }

    /// `aicf train --nproc`'s launcher marks a run it interrupted where
    /// the run is still recorded as running, and leaves a run that ended
    /// (finished, failed) as it is.
    #[test]
    fn only_a_running_run_is_marked_interrupted_by_the_launcher() {
        let dir = std::env::temp_dir().join(format!("aicf-registry-mark-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let runs = Runs::open(&dir.join("runs.sqlite")).unwrap();
        let running = runs.begin(&NewRun::default()).unwrap();
        let finished = runs.begin(&NewRun::default()).unwrap();
        runs.finish(finished, &[], 0, 1.0).unwrap();
        let failed = runs.begin(&NewRun::default()).unwrap();
        runs.fail(failed, "boom").unwrap();
        assert!(runs.interrupt_unfinished(running, "stopped", 2.0).unwrap());
        assert!(!runs.interrupt_unfinished(finished, "stopped", 2.0).unwrap());
        assert!(!runs.interrupt_unfinished(failed, "stopped", 2.0).unwrap());
        let status: Vec<String> = runs.list().unwrap().into_iter().map(|r| r.status).collect();
        assert_eq!(status, ["interrupted", "finished", "failed"]);
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A resume goes on in its run's row from the checkpoint directory the
    /// row records (or where it records none); from another (a copy of
    /// it) the row is left alone.
    #[test]
    fn a_resume_from_a_copied_checkpoint_directory_leaves_the_row_alone() {
        let dir = std::env::temp_dir().join(format!("aicf-registry-copy-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let runs = Runs::open(&dir.join("runs.sqlite")).unwrap();
        let at = |d: Option<&str>| Settings { checkpoint_dir: d.map(String::from), ..Settings::default() };
        let run = NewRun { model_hash: "m".into(), settings: at(Some("/ckpt")), ..NewRun::default() };
        let id = runs.begin(&run).unwrap();
        assert!(!runs.resume(id, "m", None, "m", 0, &at(Some("/copy")), "aicf train --resume").unwrap());
        assert!(runs.resume(id, "m", None, "m", 0, &at(Some("/ckpt")), "aicf train --resume").unwrap());
        // An older record, without a directory, goes on as it did.
        let old = runs.begin(&NewRun { model_hash: "m".into(), ..NewRun::default() }).unwrap();
        assert!(runs.resume(old, "m", None, "m", 0, &at(Some("/copy")), "aicf train --resume").unwrap());
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A record whose JSON does not read is an error that names the
    /// column, not a blank run that a proposal would then draw on.
    #[test]
    fn a_corrupt_record_is_an_error_not_a_blank_run() {
        let dir = std::env::temp_dir().join(format!("aicf-registry-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("runs.sqlite");
        let runs = Runs::open(&path).unwrap();
        let problem = Problem { name: "p".into(), task: "classification".into(), ..Problem::default() };
        let id = runs.begin(&NewRun { problem, ..NewRun::default() }).unwrap();
        assert_eq!(runs.list().unwrap()[0].problem.name, "p");
        runs.conn.execute("UPDATE runs SET problem = '{\"name\": ' WHERE id = ?1", params![id]).unwrap();
        let e = runs.list().unwrap_err().to_string();
        assert!(e.contains("run registry") && e.contains("run 1's problem does not read as JSON"), "{e}");
        // Alone, it is the error of `runs list` too; beside a run that
        // reads, it is left out and named, and the other run is listed.
        assert!(runs.list_readable().unwrap_err().to_string().contains("run 1's problem"));
        let problem = Problem { name: "q".into(), task: "classification".into(), ..Problem::default() };
        let other = runs.begin(&NewRun { problem, ..NewRun::default() }).unwrap();
        let (rows, unread) = runs.list_readable().unwrap();
        assert_eq!(rows.iter().map(|r| r.id).collect::<Vec<_>>(), [other]);
        assert_eq!(unread.len(), 1);
        assert!(unread[0].to_string().contains("run 1's problem does not read as JSON"), "{}", unread[0]);
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A run that has not finished (running, killed) lists the epochs,
    /// FLOPs and best held-out loss its curve holds so far, not blanks.
    #[test]
    fn an_unfinished_run_lists_what_its_curve_holds() {
        let dir = std::env::temp_dir().join(format!("aicf-registry-curve-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let runs = Runs::open(&dir.join("runs.sqlite")).unwrap();
        let problem = Problem { name: "p".into(), task: "classification".into(), ..Problem::default() };
        let id = runs.begin(&NewRun { problem, ..NewRun::default() }).unwrap();
        let row = |runs: &Runs| runs.list().unwrap().remove(0);
        assert_eq!((row(&runs).epochs, row(&runs).train_flops, row(&runs).best_val_loss), (None, None, None));
        for (epoch, flops, val) in [(1, 1e6, 0.5), (2, 2e6, 0.3), (3, 3e6, 0.4)] {
            runs.conn
                .execute(
                    "INSERT INTO curve (run_id, epoch, step, train_flops, train_loss, val_loss) \
                     VALUES (?1, ?2, ?3, ?4, 1.0, ?5)",
                    params![id, epoch, 10 * epoch, flops, val],
                )
                .unwrap();
        }
        let r = row(&runs);
        assert_eq!((r.epochs, r.steps, r.train_flops, r.best_val_loss), (Some(3), Some(30), Some(3e6), Some(0.3)));
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Commands that read the registry write nothing into a file that is
    /// not one (another program's database, one with the tables and no
    /// schema version, an empty file), and say why; a directory given as
    /// the registry is named as one.
    #[test]
    fn reading_writes_nothing_and_refuses_other_databases() {
        let dir = std::env::temp_dir().join(format!("aicf-registry-read-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        // Another program's database, with tables named as the registry's.
        let app = dir.join("app.db");
        Connection::open(&app)
            .unwrap()
            .execute_batch(
                "CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT); CREATE TABLE runs(id INTEGER PRIMARY KEY);",
            )
            .unwrap();
        let before = std::fs::read(&app).unwrap();
        for e in [Runs::read(&app).map(|_| ()).unwrap_err(), Runs::open(&app).map(|_| ()).unwrap_err()] {
            assert!(e.to_string().contains("not an AICF run registry"), "{e}");
        }
        assert_eq!(std::fs::read(&app).unwrap(), before, "the other database was written");
        assert!(!Runs::companions(&app)[0].exists());
        // No file and an empty file: no registry yet, and nothing created.
        let empty = dir.join("empty.sqlite");
        assert!(Runs::read(&empty).unwrap().is_none() && !empty.exists());
        std::fs::write(&empty, b"").unwrap();
        assert!(Runs::read(&empty).unwrap().is_none());
        assert_eq!(std::fs::metadata(&empty).unwrap().len(), 0);
        // A directory.
        let e = Runs::read(&dir).map(|_| ()).unwrap_err().to_string();
        assert!(e.contains("is a directory"), "{e}");
        // A registry reads as one; its companions are its files too.
        let path = dir.join("runs.sqlite");
        drop(Runs::open(&path).unwrap());
        assert!(Runs::read(&path).unwrap().is_some_and(|r| r.list().unwrap().is_empty()));
        assert!(Runs::would_overwrite(&dir.join("runs.sqlite-wal"), &path));
        assert!(!Runs::would_overwrite(&dir.join("runs.sqlite.bak"), &path));
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A decision whose counts were edited to negative numbers is an
    /// error naming the run and column, not 2^64 - 1.
    #[test]
    fn a_negative_count_is_an_error() {
        let dir = std::env::temp_dir().join(format!("aicf-registry-neg-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("runs.sqlite");
        let runs = Runs::open(&path).unwrap();
        let problem = Problem { name: "p".into(), task: "classification".into(), ..Problem::default() };
        let id = runs.begin(&NewRun { problem, ..NewRun::default() }).unwrap();
        let d = DecisionRecord {
            step: 3,
            epoch: 1,
            trigger: "plateau".into(),
            action: "widen fc1 to 32".into(),
            outcome: "accepted".into(),
            reason: String::new(),
            params_before: 10,
            params_after: 20,
            loss_before: None,
            loss_after: None,
            ir_before: String::new(),
            ir_after: String::new(),
        };
        runs.decision(id, 0, &d).unwrap();
        assert_eq!(runs.get(id).unwrap().decisions[0].step, 3);
        runs.conn.execute("UPDATE decisions SET step = -1", []).unwrap();
        let e = runs.get(id).unwrap_err().to_string();
        assert!(e.contains("run 1's step is out of range"), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A registry on a read-only file system is read (list, get) by the
    /// commands that only read it; opening it to write still fails. Needs
    /// root to mount a read-only tmpfs: `make test` runs it after the
    /// workspace's tests where a mount works.
    #[test]
    #[ignore = "mounts a read-only tmpfs: needs root"]
    fn a_registry_on_a_read_only_file_system_is_read() {
        let dir = std::env::temp_dir().join(format!("aicf-registry-ro-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let sh = |cmd: &str| {
            let ok = std::process::Command::new("sh").args(["-c", cmd]).status().map(|s| s.success());
            assert!(ok.unwrap_or(false), "{cmd}");
        };
        sh(&format!("mount -t tmpfs -o size=4M tmpfs {}", dir.display()));
        let path = dir.join("runs.sqlite");
        {
            let runs = Runs::open(&path).unwrap();
            let problem = Problem { name: "p".into(), task: "classification".into(), ..Problem::default() };
            runs.begin(&NewRun { problem, ..NewRun::default() }).unwrap();
        }
        sh(&format!("mount -o remount,ro {}", dir.display()));
        let writable = Runs::open(&path).map(|_| ()).unwrap_err().to_string();
        let read = Runs::read(&path).map(|r| r.expect("a registry").list().unwrap());
        sh(&format!("umount {}", dir.display()));
        let _ = std::fs::remove_dir_all(&dir);
        assert!(writable.contains("run registry"), "{writable}");
        assert_eq!(read.unwrap()[0].problem.name, "p");
    }
}
