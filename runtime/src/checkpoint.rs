//! Checkpoints in the safetensors format: every parameter and optimizer
//! state symbol under its name, and in the header's `__metadata__` the IR
//! hash of the model (a checkpoint loads only into the model it came from),
//! the training position and the data-order RNG state, so that a resumed
//! run continues bit-identically.
//!
//! Writes are atomic: the file is written beside its target, flushed to
//! disk, then renamed over it, so a crash leaves the previous checkpoint
//! whole.

use crate::artifact::DType;
use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;

#[derive(Debug, thiserror::Error)]
pub enum CheckpointError {
    #[error("{path}: {message}")]
    Io { path: String, message: String },
    #[error("{path}: not a valid checkpoint: {message}")]
    Corrupt { path: String, message: String },
    #[error("{path}: the checkpoint's state does not fit this train step: {message}")]
    Mismatch { path: String, message: String },
    #[error("{path}: the checkpoint is of another model (IR hash {found}, this model's is {expected})")]
    OtherModel { path: String, found: String, expected: String },
}

/// One tensor: name, element type, shape and little-endian bytes.
pub struct Entry {
    pub name: String,
    pub dtype: DType,
    pub shape: Vec<usize>,
    pub bytes: Vec<u8>,
}

fn dtype_name(d: DType) -> &'static str {
    match d {
        DType::F32 => "F32",
        DType::F64 => "F64",
        DType::I32 => "I32",
        DType::I64 => "I64",
        DType::I1 => "BOOL",
        DType::U8 => "U8",
        DType::F16 => "F16",
        DType::BF16 => "BF16",
    }
}

fn dtype_of(name: &str) -> Option<DType> {
    Some(match name {
        "F32" => DType::F32,
        "F64" => DType::F64,
        "I32" => DType::I32,
        "I64" => DType::I64,
        "BOOL" => DType::I1,
        "U8" => DType::U8,
        "F16" => DType::F16,
        "BF16" => DType::BF16,
        _ => return None,
    })
}

/// Removes the temporary files (`<stem>.partial<pid>`) that saves of
/// `path` by processes no longer running left behind (killed mid-write).
/// Where processes cannot be looked up (no `/proc`), nothing is removed.
pub fn remove_stale_partials(path: &Path) {
    let (Some(dir), Some(stem)) = (path.parent(), path.file_stem().and_then(|s| s.to_str())) else { return };
    let dir = if dir.as_os_str().is_empty() { Path::new(".") } else { dir };
    let Ok(listing) = std::fs::read_dir(dir) else { return };
    let prefix = format!("{stem}.partial");
    for entry in listing.flatten() {
        let name = entry.file_name();
        let Some(pid) = name.to_str().and_then(|n| n.strip_prefix(&prefix)).and_then(|p| p.parse::<u32>().ok()) else {
            continue;
        };
        if process_gone(pid) {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

/// Whether process `pid` has ended, as `/proc` says: never this process,
/// and none where there is no `/proc` to ask (a temporary file or directory
/// of a live process is not taken for one a killed process left).
pub fn process_gone(pid: u32) -> bool {
    pid != std::process::id() && Path::new("/proc/self").exists() && !Path::new(&format!("/proc/{pid}")).exists()
}

/// The temporary files a save in progress writes (NUL-terminated paths
/// [`PartialGuard`] allocated), for the handler of
/// [`remove_partial_on_signal`] to remove: a save holds two at once (the
/// new checkpoint, and the link that makes the last one `prev` once it is
/// written, which held a checkpoint's space after a Ctrl-C).
#[cfg(unix)]
static WRITING: [std::sync::atomic::AtomicPtr<libc::c_char>; 4] =
    [const { std::sync::atomic::AtomicPtr::new(std::ptr::null_mut()) }; 4];

/// Names `tmp` as a file being written until the guard drops, so that a
/// SIGINT, SIGTERM or SIGHUP in between removes it (where the program
/// installed [`remove_partial_on_signal`]); up to four at a time are named,
/// and past that the latest takes the last one's place.
pub struct PartialGuard {
    #[cfg(unix)]
    path: *mut libc::c_char,
    #[cfg(unix)]
    slot: usize,
}

impl PartialGuard {
    pub fn new(tmp: &Path) -> PartialGuard {
        #[cfg(unix)]
        {
            use std::os::unix::ffi::OsStrExt;
            use std::sync::atomic::Ordering::SeqCst;
            let path =
                std::ffi::CString::new(tmp.as_os_str().as_bytes()).map_or(std::ptr::null_mut(), |c| c.into_raw());
            let last = WRITING.len() - 1;
            let mut slot = last;
            if !path.is_null() {
                match WRITING
                    .iter()
                    .position(|w| w.compare_exchange(std::ptr::null_mut(), path, SeqCst, SeqCst).is_ok())
                {
                    Some(free) => slot = free,
                    // (The path it replaces stays allocated: its guard
                    // finds the slot taken.)
                    None => WRITING[last].store(path, SeqCst),
                }
            }
            PartialGuard { path, slot }
        }
        #[cfg(not(unix))]
        {
            let _ = tmp;
            PartialGuard {}
        }
    }
}

impl Drop for PartialGuard {
    fn drop(&mut self) {
        #[cfg(unix)]
        {
            use std::sync::atomic::Ordering::SeqCst;
            if !self.path.is_null()
                && WRITING[self.slot].compare_exchange(self.path, std::ptr::null_mut(), SeqCst, SeqCst).is_ok()
            {
                // SAFETY: allocated by `CString::into_raw` in `new`, and no
                // longer reachable from `WRITING`.
                drop(unsafe { std::ffi::CString::from_raw(self.path) });
            }
            // Else a later save holds the slot, or a handler took the path
            // and the process is ending: the path stays allocated (a
            // handler may still be reading it).
        }
    }
}

/// Whether a training loop that stops cleanly at its next step is running
/// ([`interruptible`]), and whether a SIGINT asked it to stop.
static INTERRUPTIBLE: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
static INTERRUPTED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
/// The signal that asked it to stop (SIGINT, SIGTERM or SIGHUP).
static INTERRUPT_SIGNAL: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(0);

/// While the guard lives, the first SIGINT (Ctrl-C), SIGTERM (what Slurm,
/// Kubernetes and systemd send first) or SIGHUP only asks the loop to stop
/// ([`interrupted`]): the loop ends at its next step and says where the
/// run stands (a save in progress completes). A second signal, or one
/// outside the guard, ends the process as before (two that come during one
/// long write(2) of a save are delivered as one, and the same signal again
/// within half a second is taken for the first one sent twice, as
/// `timeout` sends it). Where the program installed
/// [`remove_partial_on_signal`].
pub fn interruptible() -> InterruptibleGuard {
    // Loops in several threads count; the first one to start after all
    // others ended starts afresh (a program that runs a loop again after
    // an interrupted one).
    if INTERRUPTIBLE.fetch_add(1, std::sync::atomic::Ordering::SeqCst) == 0 {
        INTERRUPT_SIGNAL.store(0, std::sync::atomic::Ordering::SeqCst);
        INTERRUPTED.store(false, std::sync::atomic::Ordering::SeqCst);
        FIRST_SIGNAL_NS.store(0, std::sync::atomic::Ordering::SeqCst);
    }
    InterruptibleGuard
}

/// See [`interruptible`].
pub struct InterruptibleGuard;

impl Drop for InterruptibleGuard {
    fn drop(&mut self) {
        INTERRUPTIBLE.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
    }
}

/// Whether a signal asked an [`interruptible`] loop to stop.
pub fn interrupted() -> bool {
    INTERRUPTED.load(std::sync::atomic::Ordering::SeqCst)
}

/// Marks the loop [`interruptible`] guards as stopped by `signal` (0: as
/// by a Ctrl-C), as a signal delivered to this process would: for the
/// ranks of a data-parallel run that stop at one step because another
/// rank was signalled. The first signal kept stays.
pub fn mark_interrupted(signal: i32) {
    use std::sync::atomic::Ordering::SeqCst;
    #[cfg(unix)]
    let _ = FIRST_SIGNAL_NS.compare_exchange(0, monotonic_ns().max(1), SeqCst, SeqCst);
    let _ = INTERRUPT_SIGNAL.compare_exchange(0, signal, SeqCst, SeqCst);
    INTERRUPTED.store(true, SeqCst);
}

/// The signal that stopped the loop ([`interruptible`]): `None` where
/// none did, `Some(0)` where [`mark_interrupted`] was given none.
pub fn interrupt_signal() -> Option<i32> {
    interrupted().then(|| INTERRUPT_SIGNAL.load(std::sync::atomic::Ordering::SeqCst))
}

/// The exit status of a program a signal stopped through
/// [`interruptible`]: 128 plus the signal's number, as a shell reports a
/// program the signal ended (130 for a Ctrl-C); `None` where none did.
pub fn interrupted_status() -> Option<i32> {
    // (0: no signal kept, the loop's own stop: as a Ctrl-C's. SIGHUP is 1.)
    interrupted().then(|| match INTERRUPT_SIGNAL.load(std::sync::atomic::Ordering::SeqCst) {
        0 => 130,
        signal => 128 + signal,
    })
}

/// When the first signal of an [`interruptible`] loop came (CLOCK_MONOTONIC,
/// nanoseconds).
static FIRST_SIGNAL_NS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
/// The same signal this soon after the first is a duplicate of it.
const DUPLICATE_NS: u64 = 500_000_000;

/// CLOCK_MONOTONIC in nanoseconds (async-signal-safe); 0 where it fails.
#[cfg(unix)]
fn monotonic_ns() -> u64 {
    let mut t = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes the timespec given; it is
    // async-signal-safe.
    if unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut t) } != 0 {
        return 0;
    }
    (t.tv_sec as u64).saturating_mul(1_000_000_000).saturating_add(t.tv_nsec as u64)
}

/// Removes the temporary file of a save in progress, then ends the process
/// as `signal` would have (its default action, so the exit status names
/// it). Only async-signal-safe calls. The first signal inside
/// [`interruptible`] only sets the flag [`interrupted`] reads.
#[cfg(unix)]
extern "C" fn remove_partial(signal: libc::c_int) {
    use std::sync::atomic::Ordering::SeqCst;
    // (The signal is kept before the flag is set: a reader of the flag
    // finds it. The first kept stays.)
    // (0 is "no first signal yet".)
    let now = monotonic_ns().max(1);
    if INTERRUPTIBLE.load(SeqCst) > 0 {
        // The first signal is the one whose time is kept (one
        // compare-exchange: threads may take signals at once); its signal
        // is kept before the flag is set, so a reader of the flag finds it.
        if FIRST_SIGNAL_NS.compare_exchange(0, now, SeqCst, SeqCst).is_ok() {
            let _ = INTERRUPT_SIGNAL.compare_exchange(0, signal, SeqCst, SeqCst);
            INTERRUPTED.store(true, SeqCst);
            return;
        }
        // The same signal again within DUPLICATE_NS is the first one sent
        // twice, not a second ask: `timeout` signals its command, then its
        // whole process group, the command included, and where the two did
        // not arrive as one the run died without its stop (1 time in 30).
        // (A kept signal of 0 is the first one's, not yet stored, or a
        // stop by `mark_interrupted`: taken as the same.)
        let kept = INTERRUPT_SIGNAL.load(SeqCst);
        if (kept == signal || kept == 0) && now.saturating_sub(FIRST_SIGNAL_NS.load(SeqCst)) < DUPLICATE_NS {
            return;
        }
    }
    // SAFETY: NUL-terminated paths from `PartialGuard::new`, never freed
    // once taken from `WRITING`; unlink, write, signal and raise are
    // async-signal-safe.
    unsafe {
        for slot in &WRITING {
            let path = slot.swap(std::ptr::null_mut(), SeqCst);
            if !path.is_null() {
                libc::unlink(path);
            }
        }
        if INTERRUPTIBLE.load(SeqCst) > 0 {
            // (The first signal's stop would have said where the run
            // stands; this one ends it before that.)
            let said = b"\naicf: a second signal: stopped at once, before the step's end (checkpoints already saved \
                         are whole)\n";
            let _ = libc::write(2, said.as_ptr().cast(), said.len());
        }
        libc::signal(signal, libc::SIG_DFL);
        libc::raise(signal);
    }
}

/// Has SIGINT, SIGTERM and SIGHUP first remove the temporary file of a
/// checkpoint being written (`<stem>.partial<pid>`), then end the process
/// as they would have: a Ctrl-C during a save left that file until the
/// next run in the directory removed it. For programs (the `aicf` CLI); a
/// library leaves its host's signals alone. A signal the process ignores
/// (`nohup`'s SIGHUP) stays ignored.
pub fn remove_partial_on_signal() {
    #[cfg(unix)]
    for s in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        let handler = remove_partial as extern "C" fn(libc::c_int) as libc::sighandler_t;
        // SAFETY: installing a handler that only makes async-signal-safe
        // calls.
        unsafe {
            if libc::signal(s, handler) == libc::SIG_IGN {
                libc::signal(s, libc::SIG_IGN);
            }
        }
    }
}

/// Writes `entries` and `metadata` to `path` atomically.
/// The metadata key of a checkpoint's per-tensor CRC-32s (a JSON object,
/// tensor name to hex): [`load`] refuses a tensor whose bytes changed.
pub const CHECKSUMS: &str = "aicf.crc32";

/// The metadata key of the CRC-32 of every other metadata entry (the run's
/// record, the vocabulary, the tensors' checksums): [`load`] and
/// [`read_metadata`] refuse metadata that changed.
pub const METADATA_CHECKSUM: &str = "aicf.metadata.crc32";

/// The checksum [`METADATA_CHECKSUM`] holds: of the other entries as JSON,
/// in key order.
fn metadata_checksum(metadata: &BTreeMap<String, String>) -> String {
    let others: BTreeMap<&String, &String> = metadata.iter().filter(|(k, _)| *k != METADATA_CHECKSUM).collect();
    format!("{:08x}", crc32fast::hash(serde_json::to_string(&others).unwrap_or_default().as_bytes()))
}

/// Refuses metadata whose checksum (where it has one: checkpoints written
/// before it load without) does not match.
fn check_metadata(metadata: &BTreeMap<String, String>) -> Result<(), String> {
    match metadata.get(METADATA_CHECKSUM) {
        Some(sum) if *sum != metadata_checksum(metadata) => {
            Err("its metadata (the run's record, vocabulary and checksums) does not match its checksum (the file is \
                 damaged, or was edited)"
                .into())
        }
        _ => Ok(()),
    }
}

/// Where a file written to `path` by a rename goes: the file a symbolic
/// link names (the link stays a link; renaming over it replaced it, and
/// `-o /dev/stdout` made /dev/stdout a regular file), else `path`.
pub fn through_links(path: &Path) -> std::path::PathBuf {
    match std::fs::symlink_metadata(path) {
        // (A link to a file not yet there: the file it names, found from
        // the link's directory.)
        Ok(meta) if meta.file_type().is_symlink() => std::fs::canonicalize(path).unwrap_or_else(|_| {
            std::fs::read_link(path)
                .map_or_else(|_| path.to_path_buf(), |to| path.parent().map_or(to.clone(), |dir| dir.join(&to)))
        }),
        _ => path.to_path_buf(),
    }
}

/// The temporary file a write of `target` goes to before it is renamed
/// into place: `target` with the extension `ext`, or, where that name
/// would pass the file system's 255 bytes (a valid name of 240 bytes was
/// refused as "File name too long"), a short hidden name beside it.
pub fn temp_beside(target: &Path, ext: &str) -> std::path::PathBuf {
    let name = target.with_extension(ext);
    match name.file_name() {
        Some(n) if n.len() > 255 => target.with_file_name(format!(".aicf.{ext}")),
        _ => name,
    }
}

/// Whether `path` is, or links to, a device, a pipe or a socket: written
/// to as it is (`-o /dev/null`, `-o >(wc -c)`), never replaced.
pub fn is_stream(path: &Path) -> bool {
    use std::os::unix::fs::FileTypeExt;
    std::fs::metadata(path).is_ok_and(|m| {
        let t = m.file_type();
        t.is_char_device() || t.is_block_device() || t.is_fifo() || t.is_socket()
    })
}

/// Refuses `path` as a file to be replaced by a rename where it is a
/// directory, a device, a pipe or a socket: the rename would put a plain
/// file in its place (a checkpoint saved to `/dev/null` replaced the
/// device). A symbolic link passes: checkpoints and printed outputs are
/// renamed over the file it names ([`through_links`]). The error is the
/// reason, without the path.
pub fn refuse_replacing_special(path: &Path) -> Result<(), String> {
    match std::fs::symlink_metadata(path) {
        Ok(meta) if !meta.is_file() && !meta.file_type().is_symlink() => {
            let what = if meta.is_dir() { "a directory" } else { "not a regular file (a device, pipe or socket)" };
            Err(format!("{what}: an output is written to a file, and is not replaced"))
        }
        _ => Ok(()),
    }
}

pub fn save(path: &Path, entries: &[Entry], metadata: &BTreeMap<String, String>) -> Result<(), CheckpointError> {
    let io = |e: std::io::Error| CheckpointError::Io { path: path.display().to_string(), message: e.to_string() };
    let target = through_links(path);
    let path = target.as_path();
    refuse_replacing_special(path)
        .map_err(|message| CheckpointError::Io { path: path.display().to_string(), message })?;
    let sums: BTreeMap<&str, String> =
        entries.iter().map(|e| (e.name.as_str(), format!("{:08x}", crc32fast::hash(&e.bytes)))).collect();
    let mut metadata = metadata.clone();
    metadata.insert(CHECKSUMS.into(), serde_json::to_string(&sums).map_err(|e| io(std::io::Error::other(e)))?);
    metadata.remove(METADATA_CHECKSUM);
    let sum = metadata_checksum(&metadata);
    metadata.insert(METADATA_CHECKSUM.into(), sum);
    let metadata = &metadata;
    let mut header = serde_json::Map::new();
    header.insert("__metadata__".into(), serde_json::to_value(metadata).map_err(|e| io(std::io::Error::other(e)))?);
    let mut offset = 0usize;
    for e in entries {
        header.insert(
            e.name.clone(),
            serde_json::json!({"dtype": dtype_name(e.dtype), "shape": e.shape, "data_offsets": [offset, offset + e.bytes.len()]}),
        );
        offset += e.bytes.len();
    }
    let mut text = serde_json::to_string(&header).map_err(|e| io(std::io::Error::other(e)))?;
    while text.len() % 8 != 0 {
        text.push(' ');
    }
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(io)?;
    }
    remove_stale_partials(path);
    let tmp = path.with_extension(format!("partial{}", std::process::id()));
    let guard = PartialGuard::new(&tmp);
    let written = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(&(text.len() as u64).to_le_bytes())?;
        f.write_all(text.as_bytes())?;
        for e in entries {
            f.write_all(&e.bytes)?;
        }
        f.sync_all()?;
        std::fs::rename(&tmp, path)?;
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            // The rename itself reaches the disk with the directory.
            std::fs::File::open(dir)?.sync_all()?;
        }
        Ok(())
    })();
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(io(e));
    }
    drop(guard);
    Ok(())
}

/// Reads only a checkpoint's metadata (its header), not its tensors: what
/// a resume checks before anything is compiled.
pub fn read_metadata(path: &Path) -> Result<BTreeMap<String, String>, CheckpointError> {
    header_metadata(path, true)
}

/// Whether `path` is a checkpoint (its metadata records an epoch), whole
/// or cut short: what a write that would replace it asks (a checkpoint
/// still being copied is one).
pub fn holds_checkpoint(path: &Path) -> bool {
    header_metadata(path, false).is_ok_and(|m| m.contains_key("epoch"))
}

/// The metadata of `path`'s header; with `whole`, refused where the file
/// is shorter than its header says.
fn header_metadata(path: &Path, whole: bool) -> Result<BTreeMap<String, String>, CheckpointError> {
    use std::io::Read;
    let p = path.display().to_string();
    let io = |e: std::io::Error| CheckpointError::Io { path: p.clone(), message: e.to_string() };
    let corrupt = |m: String| CheckpointError::Corrupt { path: p.clone(), message: m };
    regular(path)?;
    let mut file = std::fs::File::open(path).map_err(io)?;
    let size = file.metadata().map_err(io)?.len();
    let mut length = [0u8; 8];
    file.read_exact(&mut length).map_err(|_| corrupt(format!("{size} bytes, shorter than the header length")))?;
    let n = u64::from_le_bytes(length);
    if n > size.saturating_sub(8) {
        let mut first = [0u8; 1];
        let json = file.read_exact(&mut first).is_ok() && first[0] == b'{';
        return Err(corrupt(not_safetensors(n, size, json)));
    }
    let mut header = vec![0u8; n as usize];
    file.read_exact(&mut header).map_err(io)?;
    let header: serde_json::Map<String, serde_json::Value> =
        serde_json::from_slice(&header).map_err(|e| corrupt(format!("header: {e}")))?;
    let metadata: BTreeMap<String, String> = match header.get("__metadata__") {
        Some(v) => serde_json::from_value(v.clone()).map_err(|e| corrupt(format!("metadata: {e}")))?,
        None => BTreeMap::new(),
    };
    not_a_tensor(&header).map_err(corrupt)?;
    // A file cut short (a copy or a save that did not finish) keeps its
    // header: its tensors' bytes end past the file's end. Said here, where
    // the metadata is read first (a truncated checkpoint of another model
    // was read as one "with no text vocabulary").
    let end = header
        .iter()
        .filter(|(name, _)| *name != "__metadata__")
        .filter_map(|(_, v)| v.get("data_offsets")?.get(1)?.as_u64())
        .max()
        .unwrap_or(0);
    let data = size - 8 - n;
    if whole && end > data {
        return Err(corrupt(format!(
            "truncated: its tensors take {end} bytes after the header, and the file holds {data} (a copy or a save \
             that did not finish)"
        )));
    }
    // Bytes past the last tensor are none a save writes (a file grown by
    // `truncate -s`, or another file's bytes appended), and a file of any
    // size was read whole for them (a sparse 100 GB one: "out of memory").
    if whole && end < data {
        return Err(corrupt(format!(
            "{} bytes past its last tensor, which ends at byte {} (the file was extended or appended to; a save \
             writes none)",
            data - end,
            8 + n + end
        )));
    }
    check_metadata(&metadata).map_err(corrupt)?;
    Ok(metadata)
}

/// A header entry that is neither the metadata nor a tensor (a byte of the
/// header changed: `__metadata__` misspelt): said as damage (a checkpoint
/// without metadata was "no epoch", or "__metadata^_: dtype").
fn not_a_tensor(header: &serde_json::Map<String, serde_json::Value>) -> Result<(), String> {
    match header.iter().find(|(name, v)| *name != "__metadata__" && v.get("dtype").is_none()) {
        Some((name, _)) => Err(format!(
            "its header's entry {name:?} is neither the metadata nor a tensor (the file is damaged, or not a \
             checkpoint)"
        )),
        None => Ok(()),
    }
}

/// A checkpoint is a regular file: a directory is named as such, and a
/// pipe or device refused (a pipe's size reads 0; a device never ends).
fn regular(path: &Path) -> Result<(), CheckpointError> {
    let p = path.display().to_string();
    match std::fs::metadata(path) {
        Ok(m) if m.is_dir() => {
            Err(CheckpointError::Io { path: p, message: "is a directory, not a checkpoint file".into() })
        }
        Ok(m) if !m.is_file() => Err(CheckpointError::Io {
            path: p,
            message: "not a regular file (a device, pipe or socket); a checkpoint is read from a file".into(),
        }),
        _ => Ok(()),
    }
}

/// The error for a first 8 bytes that give a header longer than the file.
fn not_safetensors(header: u64, size: u64, json: bool) -> String {
    if json {
        // The header's JSON starts where it should: a checkpoint cut short
        // inside its header (the IR it carries makes that most of it).
        return format!(
            "truncated: its header takes {header} bytes, and the file holds {size} (a copy or a save that did not \
             finish)"
        );
    }
    format!(
        "not a safetensors checkpoint (its first 8 bytes give a header of {header} bytes, in a file of {size}; \
         is it the model or another file?)"
    )
}

/// Reads a checkpoint: its entries by name and its metadata.
pub fn load(path: &Path) -> Result<(BTreeMap<String, Entry>, BTreeMap<String, String>), CheckpointError> {
    let p = path.display().to_string();
    regular(path)?;
    // The header first: a file whose tensors do not fill it exactly is
    // refused before it is read whole.
    header_metadata(path, true)?;
    let bytes = std::fs::read(path).map_err(|e| CheckpointError::Io { path: p.clone(), message: e.to_string() })?;
    let corrupt = |m: String| CheckpointError::Corrupt { path: p.clone(), message: m };
    if bytes.len() < 8 {
        return Err(corrupt(format!("{} bytes, shorter than the header length", bytes.len())));
    }
    let n = u64::from_le_bytes(bytes[..8].try_into().unwrap_or_default()) as usize;
    if n > bytes.len() - 8 {
        return Err(corrupt(not_safetensors(n as u64, bytes.len() as u64, bytes.get(8) == Some(&b'{'))));
    }
    let header: serde_json::Map<String, serde_json::Value> =
        serde_json::from_slice(&bytes[8..8 + n]).map_err(|e| corrupt(format!("header: {e}")))?;
    not_a_tensor(&header).map_err(corrupt)?;
    let data = &bytes[8 + n..];
    let mut metadata: BTreeMap<String, String> = BTreeMap::new();
    let mut entries = BTreeMap::new();
    for (name, v) in header {
        if name == "__metadata__" {
            metadata = serde_json::from_value(v).map_err(|e| corrupt(format!("metadata: {e}")))?;
            continue;
        }
        let dtype = v["dtype"].as_str().and_then(dtype_of).ok_or_else(|| corrupt(format!("{name}: dtype")))?;
        let shape: Vec<usize> =
            serde_json::from_value(v["shape"].clone()).map_err(|e| corrupt(format!("{name}: shape: {e}")))?;
        let [lo, hi]: [usize; 2] =
            serde_json::from_value(v["data_offsets"].clone()).map_err(|e| corrupt(format!("{name}: offsets: {e}")))?;
        let expected = shape.iter().try_fold(dtype.bytes(), |n, &d| n.checked_mul(d));
        if hi < lo || hi > data.len() || Some(hi - lo) != expected {
            return Err(corrupt(format!(
                "{name}: bytes [{lo}, {hi}) do not hold {shape:?} {dtype:?} in {} data bytes",
                data.len()
            )));
        }
        entries.insert(name.clone(), Entry { name, dtype, shape, bytes: data[lo..hi].to_vec() });
    }
    check_metadata(&metadata).map_err(corrupt)?;
    // Checkpoints written before the checksums load without them.
    if let Some(text) = metadata.get(CHECKSUMS) {
        let sums: BTreeMap<String, String> =
            serde_json::from_str(text).map_err(|e| corrupt(format!("{CHECKSUMS}: {e}")))?;
        for (name, sum) in &sums {
            if let Some(e) = entries.get(name)
                && format!("{:08x}", crc32fast::hash(&e.bytes)) != *sum
            {
                return Err(corrupt(format!("{name}: its bytes do not match their checksum (the file is damaged)")));
            }
        }
        // The checksums name every tensor written: a name that changed in
        // the header was "no fc2.bias.exp_avg (saved with another
        // optimizer?)".
        if let Some(name) = entries.keys().find(|n| !sums.contains_key(*n)) {
            return Err(corrupt(format!(
                "{name}: a tensor its checksums do not name (the header is damaged: a tensor's name changed?)"
            )));
        }
        if let Some(name) = sums.keys().find(|n| !entries.contains_key(*n)) {
            return Err(corrupt(format!("{name}: a tensor its checksums name is not in it (the header is damaged)")));
        }
    }
    Ok((entries, metadata))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A byte of a tensor changed on disk is found by its checksum, naming
    /// the tensor; the untouched file loads.
    #[test]
    fn a_damaged_tensor_fails_its_checksum() {
        let path = std::env::temp_dir().join(format!("aicf-ckpt-{}-crc.safetensors", std::process::id()));
        let entries = [
            Entry {
                name: "a".into(),
                dtype: DType::F32,
                shape: vec![2],
                bytes: [1.0f32, 2.0].iter().flat_map(|v| v.to_le_bytes()).collect(),
            },
            Entry { name: "b".into(), dtype: DType::F32, shape: vec![1], bytes: 3.0f32.to_le_bytes().to_vec() },
        ];
        save(&path, &entries, &BTreeMap::from([("epoch".to_string(), "1".to_string())])).unwrap();
        let (loaded, meta) = load(&path).unwrap();
        assert_eq!(loaded["b"].bytes, entries[1].bytes);
        assert!(meta.contains_key(CHECKSUMS) && meta["epoch"] == "1");
        // The data section ends with b's 4 bytes: change the last one.
        let mut bytes = std::fs::read(&path).unwrap();
        let last = bytes.len() - 1;
        bytes[last] ^= 0x40;
        std::fs::write(&path, &bytes).unwrap();
        let e = load(&path).err().unwrap().to_string();
        assert!(e.contains("b: its bytes do not match their checksum"), "{e}");
        let _ = std::fs::remove_file(&path);
    }

    /// A checkpoint saved through a symbolic link replaces the file the
    /// link names and leaves the link a link (the rename replaced it).
    #[test]
    fn a_save_through_a_link_keeps_the_link() {
        let dir = std::env::temp_dir().join(format!("aicf-ckpt-{}-link", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let (target, link) = (dir.join("real.safetensors"), dir.join("last.safetensors"));
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let entry = Entry { name: "a".into(), dtype: DType::F32, shape: vec![1], bytes: 1.0f32.to_le_bytes().to_vec() };
        save(&link, &[entry], &BTreeMap::new()).unwrap();
        assert!(std::fs::symlink_metadata(&link).unwrap().file_type().is_symlink());
        assert!(load(&target).is_ok() && load(&link).is_ok());
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Metadata edited in place (a vocabulary changed by hand, of the same
    /// length, so the header keeps its size) fails the metadata's checksum,
    /// in [`read_metadata`] and in [`load`].
    #[test]
    fn edited_metadata_fails_its_checksum() {
        let path = std::env::temp_dir().join(format!("aicf-ckpt-{}-meta.safetensors", std::process::id()));
        let entries = [Entry { name: "w".into(), dtype: DType::F32, shape: vec![1], bytes: vec![0, 0, 128, 63] }];
        let metadata = BTreeMap::from([("vocabulary".to_string(), "abcdef".to_string())]);
        save(&path, &entries, &metadata).unwrap();
        assert_eq!(read_metadata(&path).unwrap()["vocabulary"], "abcdef");
        let mut bytes = std::fs::read(&path).unwrap();
        let at = bytes.windows(6).position(|w| w == b"abcdef").unwrap();
        bytes[at..at + 6].copy_from_slice(b"fedcba");
        std::fs::write(&path, &bytes).unwrap();
        for e in [read_metadata(&path).err().unwrap().to_string(), load(&path).err().unwrap().to_string()] {
            assert!(e.contains("its metadata (the run's record, vocabulary and checksums) does not match"), "{e}");
        }
        let _ = std::fs::remove_file(&path);
    }

    /// A byte of the header changed where it names things: a tensor's name
    /// (it read as a missing optimizer slot) or the metadata's key (as a
    /// checkpoint without metadata, or "__metadata^_: dtype") is said as
    /// damage, by [`load`] and [`read_metadata`].
    #[test]
    fn a_damaged_header_name_is_said_as_damage() {
        let path = std::env::temp_dir().join(format!("aicf-ckpt-{}-names.safetensors", std::process::id()));
        let entries = [
            Entry { name: "w.exp_avg".into(), dtype: DType::F32, shape: vec![1], bytes: vec![0, 0, 128, 63] },
            Entry { name: "w".into(), dtype: DType::F32, shape: vec![1], bytes: vec![0, 0, 0, 64] },
        ];
        save(&path, &entries, &BTreeMap::from([("epoch".to_string(), "1".to_string())])).unwrap();
        let good = std::fs::read(&path).unwrap();
        let changed = |from: &[u8], to: &[u8]| {
            let mut bytes = good.clone();
            let at = bytes.windows(from.len()).position(|w| w == from).unwrap();
            bytes[at..at + to.len()].copy_from_slice(to);
            std::fs::write(&path, &bytes).unwrap();
        };
        changed(b"\"w.exp_avg\"", b"\"w.exp_avf\"");
        let e = load(&path).err().unwrap().to_string();
        assert!(e.contains("w.exp_avf: a tensor its checksums do not name (the header is damaged"), "{e}");
        changed(b"__metadata__", b"__metadata^_");
        for e in [read_metadata(&path).err().unwrap().to_string(), load(&path).err().unwrap().to_string()] {
            assert!(e.contains("its header's entry \"__metadata^_\" is neither the metadata nor a tensor"), "{e}");
        }
        let _ = std::fs::remove_file(&path);
    }

    /// A file of `header` (JSON) followed by `data`.
    fn file(name: &str, header: &str, data: &[u8]) -> std::path::PathBuf {
        let path = std::env::temp_dir().join(format!("aicf-ckpt-{}-{name}.safetensors", std::process::id()));
        let mut bytes = (header.len() as u64).to_le_bytes().to_vec();
        bytes.extend_from_slice(header.as_bytes());
        bytes.extend_from_slice(data);
        std::fs::write(&path, bytes).unwrap();
        path
    }

    /// Crafted headers (shapes whose size overflows, offsets past the data,
    /// a header longer than the file) are errors naming the file, never a
    /// panic or an allocation of the claimed size.
    #[test]
    fn crafted_checkpoints_are_errors() {
        let cases = [
            (
                "huge",
                r#"{"w": {"dtype": "F32", "shape": [4611686018427387904, 4611686018427387904], "data_offsets": [0, 16]}}"#,
            ),
            ("past", r#"{"w": {"dtype": "F32", "shape": [4], "data_offsets": [0, 1600]}}"#),
            ("reversed", r#"{"w": {"dtype": "F32", "shape": [0], "data_offsets": [16, 0]}}"#),
            ("dtype", r#"{"w": {"dtype": "Q7", "shape": [4], "data_offsets": [0, 16]}}"#),
        ];
        for (name, header) in cases {
            let path = file(name, header, &[0u8; 16]);
            let e = load(&path).err().unwrap_or_else(|| panic!("{name} loaded"));
            let text = e.to_string();
            assert!(
                text.contains(&path.display().to_string()) && text.contains("not a valid checkpoint"),
                "{name}: {text}"
            );
            let _ = std::fs::remove_file(&path);
        }
        let path = std::env::temp_dir().join(format!("aicf-ckpt-{}-long.safetensors", std::process::id()));
        std::fs::write(&path, u64::MAX.to_le_bytes()).unwrap();
        assert!(load(&path).is_err() && read_metadata(&path).is_err());
        let _ = std::fs::remove_file(&path);
    }

    /// The files a signal's handler removes: every guard's while it lives
    /// (a save holds two: the new checkpoint and the staged `prev` link,
    /// which was not named), none once they drop.
    #[cfg(unix)]
    #[test]
    fn every_living_guard_names_its_file() {
        let named = || -> Vec<String> {
            WRITING
                .iter()
                .map(|w| w.load(std::sync::atomic::Ordering::SeqCst))
                .filter(|p| !p.is_null())
                // SAFETY: paths of guards alive in this test.
                .map(|p| unsafe { std::ffi::CStr::from_ptr(p) }.to_string_lossy().into_owned())
                .collect()
        };
        let first = PartialGuard::new(Path::new("/nowhere/last.partial1"));
        let second = PartialGuard::new(Path::new("/nowhere/prev.partial1"));
        let both = named();
        assert!(both.contains(&"/nowhere/last.partial1".to_string()), "{both:?}");
        assert!(both.contains(&"/nowhere/prev.partial1".to_string()), "{both:?}");
        drop(first);
        assert!(!named().contains(&"/nowhere/last.partial1".to_string()));
        assert!(named().contains(&"/nowhere/prev.partial1".to_string()));
        drop(second);
        assert!(!named().iter().any(|p| p.starts_with("/nowhere/")));
    }

    /// The same signal twice at once (`timeout` signals its command, then
    /// its process group) asks the loop to stop once: the second returns,
    /// where it ended the process (1 run in 30).
    #[cfg(unix)]
    #[test]
    fn the_same_signal_sent_twice_at_once_is_one_stop() {
        let guard = interruptible();
        remove_partial(libc::SIGTERM);
        assert!(interrupted());
        // (Were it taken for a second ask, this test's process would end.)
        remove_partial(libc::SIGTERM);
        assert_eq!(interrupt_signal(), Some(libc::SIGTERM));
        drop(guard);
    }

    /// A checkpoint cut short after its header (an unfinished copy) is
    /// said as truncated by [`read_metadata`], which reads the header
    /// alone, and by [`load`]; the whole file reads.
    #[test]
    fn a_truncated_checkpoint_is_said_by_its_metadata_read() {
        let path = std::env::temp_dir().join(format!("aicf-ckpt-{}-cut.safetensors", std::process::id()));
        let entries = [Entry { name: "w".into(), dtype: DType::F32, shape: vec![64], bytes: vec![0; 256] }];
        save(&path, &entries, &BTreeMap::from([("epoch".to_string(), "1".to_string())])).unwrap();
        assert_eq!(read_metadata(&path).unwrap()["epoch"], "1");
        let bytes = std::fs::read(&path).unwrap();
        std::fs::write(&path, &bytes[..bytes.len() - 100]).unwrap();
        let e = read_metadata(&path).err().unwrap().to_string();
        assert!(e.contains("truncated: its tensors take 256 bytes after the header, and the file holds 156"), "{e}");
        assert!(load(&path).is_err());
        // Still a checkpoint to the writes that would replace it.
        assert!(holds_checkpoint(&path));
        let _ = std::fs::remove_file(&path);
    }

    /// A temporary name fits the file system where the target's does: a
    /// target of 250 bytes gets a short one beside it.
    #[test]
    fn a_long_targets_temporary_name_stays_short() {
        let dir = Path::new("/tmp/x");
        assert_eq!(temp_beside(&dir.join("p.npy"), "12.t.tmp"), dir.join("p.12.t.tmp"));
        let long = format!("{}.npy", "p".repeat(250));
        let tmp = temp_beside(&dir.join(&long), "12.t.tmp");
        assert_eq!(tmp, dir.join(".aicf.12.t.tmp"));
    }

    /// Bytes past the last tensor (a file extended by `truncate -s`, or
    /// appended to) are refused by both reads, before the file is read
    /// whole: a sparse file of 100 GB ran out of memory.
    #[test]
    fn bytes_past_the_last_tensor_are_refused_unread() {
        let path = std::env::temp_dir().join(format!("aicf-ckpt-{}-extended.safetensors", std::process::id()));
        let entries = [Entry { name: "w".into(), dtype: DType::F32, shape: vec![64], bytes: vec![0; 256] }];
        save(&path, &entries, &BTreeMap::from([("epoch".to_string(), "1".to_string())])).unwrap();
        let size = std::fs::metadata(&path).unwrap().len();
        std::fs::OpenOptions::new().write(true).open(&path).unwrap().set_len(size + (100 << 30)).unwrap();
        for e in [read_metadata(&path).err().unwrap().to_string(), load(&path).err().unwrap().to_string()] {
            assert!(
                e.contains(&format!("{} bytes past its last tensor, which ends at byte {size}", 100u64 << 30)),
                "{e}"
            );
        }
        assert!(holds_checkpoint(&path));
        let _ = std::fs::remove_file(&path);
    }
}
