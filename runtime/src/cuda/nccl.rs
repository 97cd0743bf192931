//! NCCL, the collectives of a data-parallel run on GPUs, opened at run time
//! (like libcuda and cuBLASLt): a build without CUDA, or a machine without
//! NCCL, still builds and runs everything else.
//!
//! The library is `$AICF_NCCL_LIB` if set, else `libnccl.so.2` (or
//! `libnccl.so`) where the dynamic loader finds it, else the one of the
//! `nvidia-nccl-cu12` wheel in a Python installation (the one PyTorch
//! uses). Only what a train step needs is bound: a communicator per
//! process (its id made by rank 0 and sent over the run's host
//! communicator), grouped all-reduces on a stream, and the pre-multiplied
//! sum (`ncclRedOpCreatePreMulSum`, NCCL 2.11) that scales each replica's
//! buffers by its weight, read from device memory, so a captured CUDA Graph
//! replays it with whatever weight the step's input holds.
//!
//! The ABI below is NCCL's `nccl.h` (stable since 2.0 for these calls):
//! `ncclComm_t` a pointer, `ncclUniqueId` 128 bytes passed by value,
//! enums as C ints.

use std::ffi::{CStr, c_char, c_int, c_void};
use std::path::PathBuf;
use std::sync::OnceLock;

pub(crate) type Comm = *mut c_void;

#[repr(C)]
#[derive(Clone, Copy)]
pub(crate) struct UniqueId {
    pub(crate) internal: [u8; 128],
}

/// `ncclDataType_t` of f32.
pub(crate) const FLOAT32: c_int = 7;
/// `ncclScalarDevice`: the pre-multiplied sum reads its scalar from device
/// memory when the collective runs.
pub(crate) const SCALAR_DEVICE: c_int = 0;

type GetUniqueId = unsafe extern "C" fn(*mut UniqueId) -> c_int;
type CommInitRank = unsafe extern "C" fn(*mut Comm, c_int, UniqueId, c_int) -> c_int;
type AllReduce = unsafe extern "C" fn(*const c_void, *mut c_void, usize, c_int, c_int, Comm, *mut c_void) -> c_int;
type RedOpCreatePreMulSum = unsafe extern "C" fn(*mut c_int, *mut c_void, c_int, c_int, Comm) -> c_int;
type RedOpDestroy = unsafe extern "C" fn(c_int, Comm) -> c_int;
type Group = unsafe extern "C" fn() -> c_int;
type CommDestroy = unsafe extern "C" fn(Comm) -> c_int;
type GetErrorString = unsafe extern "C" fn(c_int) -> *const c_char;
type GetVersion = unsafe extern "C" fn(*mut c_int) -> c_int;

/// The bound entry points.
pub(crate) struct Nccl {
    pub(crate) get_unique_id: GetUniqueId,
    pub(crate) comm_init_rank: CommInitRank,
    pub(crate) all_reduce: AllReduce,
    pub(crate) red_op_create_pre_mul_sum: RedOpCreatePreMulSum,
    pub(crate) red_op_destroy: RedOpDestroy,
    pub(crate) group_start: Group,
    pub(crate) group_end: Group,
    pub(crate) comm_destroy: CommDestroy,
    get_error_string: GetErrorString,
    /// `2.21.5` read as 22105.
    pub(crate) version: c_int,
    pub(crate) path: PathBuf,
    _library: libloading::Library,
}

// SAFETY: the entry points are plain C functions of a library that stays
// loaded for the life of the process.
unsafe impl Send for Nccl {}
unsafe impl Sync for Nccl {}

impl Nccl {
    /// NCCL's message for `code`.
    pub(crate) fn error(&self, code: c_int) -> String {
        // SAFETY: NCCL returns a static string for every code.
        let text = unsafe { (self.get_error_string)(code) };
        if text.is_null() {
            return format!("NCCL error {code}");
        }
        unsafe { CStr::from_ptr(text) }.to_string_lossy().into_owned()
    }

    /// `Err(what: message)` for a failed call.
    pub(crate) fn check(&self, code: c_int, what: &str) -> Result<(), String> {
        if code == 0 { Ok(()) } else { Err(format!("{what}: {}", self.error(code))) }
    }
}

/// Where NCCL may be, in order.
fn candidates() -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = Vec::new();
    if let Some(p) = std::env::var_os("AICF_NCCL_LIB") {
        return vec![PathBuf::from(p)];
    }
    found.push("libnccl.so.2".into());
    found.push("libnccl.so".into());
    // The nvidia-nccl-cu12 wheel (PyTorch's) in the usual Python places.
    let mut roots: Vec<PathBuf> = ["/usr/lib", "/usr/local/lib", "/opt/conda/lib"].iter().map(PathBuf::from).collect();
    if let Some(venv) = std::env::var_os("VIRTUAL_ENV") {
        roots.push(PathBuf::from(venv).join("lib"));
    }
    if let Some(home) = std::env::var_os("HOME") {
        roots.push(PathBuf::from(home).join(".local/lib"));
    }
    for root in roots {
        let Ok(entries) = std::fs::read_dir(&root) else { continue };
        for e in entries.flatten() {
            if !e.file_name().to_string_lossy().starts_with("python3") {
                continue;
            }
            for packages in ["site-packages", "dist-packages"] {
                let lib = e.path().join(packages).join("nvidia/nccl/lib/libnccl.so.2");
                if lib.exists() {
                    found.push(lib);
                }
            }
        }
    }
    found
}

fn open() -> Result<Nccl, String> {
    let mut tried = Vec::new();
    for path in candidates() {
        // SAFETY: NCCL's initialisers only set up its own state.
        let Ok(library) = (unsafe { libloading::Library::new(&path) }) else {
            tried.push(path.display().to_string());
            continue;
        };
        macro_rules! get {
            ($name:literal, $ty:ty) => {{
                // SAFETY: the symbol has this C signature in nccl.h.
                let s: libloading::Symbol<$ty> = unsafe { library.get($name) }.map_err(|e| {
                    format!(
                        "{}: {} is missing ({e}); NCCL 2.11 or newer is needed",
                        path.display(),
                        String::from_utf8_lossy($name)
                    )
                })?;
                *s
            }};
        }
        let get_version: GetVersion = get!(b"ncclGetVersion", GetVersion);
        let mut version: c_int = 0;
        unsafe { get_version(&mut version) };
        return Ok(Nccl {
            get_unique_id: get!(b"ncclGetUniqueId", GetUniqueId),
            comm_init_rank: get!(b"ncclCommInitRank", CommInitRank),
            all_reduce: get!(b"ncclAllReduce", AllReduce),
            red_op_create_pre_mul_sum: get!(b"ncclRedOpCreatePreMulSum", RedOpCreatePreMulSum),
            red_op_destroy: get!(b"ncclRedOpDestroy", RedOpDestroy),
            group_start: get!(b"ncclGroupStart", Group),
            group_end: get!(b"ncclGroupEnd", Group),
            comm_destroy: get!(b"ncclCommDestroy", CommDestroy),
            get_error_string: get!(b"ncclGetErrorString", GetErrorString),
            version,
            path,
            _library: library,
        });
    }
    Err(format!(
        "NCCL is not installed where AICF looks (tried {}); install the nvidia-nccl-cu12 wheel or set AICF_NCCL_LIB",
        tried.join(", ")
    ))
}

/// NCCL, loaded once per process (or why it cannot be).
pub(crate) fn nccl() -> Result<&'static Nccl, String> {
    static NCCL: OnceLock<Result<Nccl, String>> = OnceLock::new();
    NCCL.get_or_init(open).as_ref().map_err(Clone::clone)
}

/// Whether NCCL can be loaded here, and from where (or why not).
pub fn available() -> Result<String, String> {
    nccl().map(|n| format!("{} (NCCL {})", n.path.display(), n.version))
}
