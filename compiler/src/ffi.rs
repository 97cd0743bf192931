//! Declarations of AICF's C API (`dialects/include/aicf-c/`), implemented in
//! the C++ half of the compiler and linked statically by `build.rs`.

use mlir_sys::{
    MlirContext, MlirDialectHandle, MlirDialectRegistry, MlirLocation, MlirLogicalResult, MlirModule, MlirOperation,
    MlirStringRef,
};
use std::ffi::{c_char, c_int, c_void};

/// Body of a TableGen-declared pass (see `aicf-c/Passes.h`).
pub type PassBodyFn =
    unsafe extern "C" fn(op: MlirOperation, options: MlirStringRef, user_data: *mut c_void) -> MlirLogicalResult;

unsafe extern "C" {
    pub fn mlirGetDialectHandle__hl__() -> MlirDialectHandle;
    pub fn mlirGetDialectHandle__ll__() -> MlirDialectHandle;
    pub fn aicfRegisterDialects(registry: MlirDialectRegistry);

    pub fn aicfSetPassBody(argument: MlirStringRef, body: PassBodyFn, user_data: *mut c_void);
    pub fn aicfRegisterPasses();

    pub fn aicfParseModule(context: MlirContext, source: MlirStringRef, source_name: MlirStringRef) -> MlirModule;

    pub fn aicfEmitRemark(location: MlirLocation, message: MlirStringRef);
    pub fn aicfWrittenOperands(op: MlirOperation, written: *mut bool, count: isize);
    pub fn aicfInferResultTypes(op: MlirOperation) -> c_int;
    pub fn aicfOptMain(argc: c_int, argv: *mut *mut c_char) -> c_int;
}

/// Borrows a Rust string as an `MlirStringRef` (no terminator needed).
pub(crate) fn string_ref(s: &str) -> MlirStringRef {
    MlirStringRef { data: s.as_ptr() as *const c_char, length: s.len() }
}

/// Copies an `MlirStringRef` into a Rust string.
///
/// # Safety
/// `s` must point at `s.length` readable bytes.
pub(crate) unsafe fn to_string(s: MlirStringRef) -> String {
    if s.length == 0 {
        return String::new();
    }
    let bytes = unsafe { std::slice::from_raw_parts(s.data as *const u8, s.length) };
    String::from_utf8_lossy(bytes).into_owned()
}
