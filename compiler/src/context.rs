//! The MLIR context AICF compiles in: the dialects its pipeline uses, and
//! diagnostics captured as values instead of printed, so that every failure
//! reaches the caller as a [`CompileError`] naming file, line and column.

use crate::error::{CompileError, Diagnostic, Result, Severity};
use crate::ffi;
use melior::{
    Context,
    diagnostic::DiagnosticSeverity,
    dialect::{DialectHandle, DialectRegistry},
    ir::{Location, Module, operation::OperationLike},
};
use std::{cell::RefCell, rc::Rc};

/// A context with AICF's dialects loaded and a diagnostic collector.
pub struct CompilerContext {
    context: Context,
    diagnostics: Rc<RefCell<Vec<Diagnostic>>>,
}

impl Default for CompilerContext {
    fn default() -> Self {
        Self::new()
    }
}

impl CompilerContext {
    /// hl and ll plus the upstream dialects AICF's IR is written with.
    pub fn new() -> Self {
        let registry = DialectRegistry::new();
        unsafe { ffi::aicfRegisterDialects(registry.to_raw()) };
        for handle in [
            DialectHandle::func(),
            DialectHandle::arith(),
            unsafe { DialectHandle::from_raw(mlir_sys::mlirGetDialectHandle__math__()) },
            DialectHandle::memref(),
            DialectHandle::tensor(),
            DialectHandle::scf(),
            // The CPU kernels' register-blocked loops.
            unsafe { DialectHandle::from_raw(mlir_sys::mlirGetDialectHandle__vector__()) },
        ] {
            handle.insert_dialect(&registry);
        }
        let context = Context::new_with_registry(&registry, false);
        context.load_all_available_dialects();
        let diagnostics = Rc::new(RefCell::new(Vec::new()));
        let sink = diagnostics.clone();
        context.attach_diagnostic_handler(move |diagnostic| {
            sink.borrow_mut().push(convert(&diagnostic));
            true // handled: nothing is printed behind the caller's back
        });
        Self { context, diagnostics }
    }

    pub fn mlir(&self) -> &Context {
        &self.context
    }

    /// Diagnostics emitted since the last call, oldest first.
    pub fn take_diagnostics(&self) -> Vec<Diagnostic> {
        std::mem::take(&mut *self.diagnostics.borrow_mut())
    }

    /// Parses and verifies `source`; `source_name` appears in locations.
    pub fn parse(&self, source: &str, source_name: &str) -> Result<Module<'_>> {
        self.take_diagnostics();
        if let Err((line, depth)) = nesting_within(source, MAX_NESTING) {
            return Err(CompileError::Parse {
                source_name: source_name.to_string(),
                diagnostics: vec![Diagnostic {
                    location: format!("{source_name}:{line}"),
                    severity: Severity::Error,
                    message: format!(
                        "brackets nest {depth} deep here; AICF reads at most {MAX_NESTING} levels (the parser \
                         recurses per level)"
                    ),
                    notes: vec![],
                }],
            });
        }
        let module = parse_named(&self.context, source, source_name);
        let Some(module) = module else {
            return Err(CompileError::Parse {
                source_name: source_name.to_string(),
                diagnostics: self.take_diagnostics(),
            });
        };
        if !module.as_operation().verify() {
            return Err(CompileError::Verify {
                source_name: source_name.to_string(),
                diagnostics: self.take_diagnostics(),
            });
        }
        Ok(module)
    }

    /// Reads and parses a `.mlir` file.
    pub fn parse_file(&self, path: &std::path::Path) -> Result<Module<'_>> {
        let source = std::fs::read_to_string(path).map_err(|e| CompileError::Parse {
            source_name: path.display().to_string(),
            diagnostics: vec![Diagnostic {
                location: path.display().to_string(),
                severity: Severity::Error,
                message: format!("cannot read the file: {e}"),
                notes: vec![],
            }],
        })?;
        self.parse(&source, &path.display().to_string())
    }
}

/// Parses with a source name, so that locations read `name:line:col`.
fn parse_named<'c>(context: &'c Context, source: &str, source_name: &str) -> Option<Module<'c>> {
    unsafe {
        let raw = ffi::aicfParseModule(context.to_raw(), ffi::string_ref(source), ffi::string_ref(source_name));
        Module::from_option_raw(raw)
    }
}

/// Renders an MLIR location as `file:line:col` where it has one.
pub fn describe_location(location: Location<'_>) -> String {
    use mlir_sys::*;
    let raw = location.to_raw();
    unsafe {
        if mlirLocationIsAFileLineColRange(raw) {
            let file = mlirIdentifierStr(mlirLocationFileLineColRangeGetFilename(raw));
            let file = ffi::to_string(file);
            let line = mlirLocationFileLineColRangeGetStartLine(raw);
            let col = mlirLocationFileLineColRangeGetStartColumn(raw);
            return format!("{file}:{line}:{col}");
        }
        if mlirLocationIsAName(raw) {
            return describe_location(Location::from_raw(mlirLocationNameGetChildLoc(raw)));
        }
        if mlirLocationIsACallSite(raw) {
            return describe_location(Location::from_raw(mlirLocationCallSiteGetCaller(raw)));
        }
        let parts = if mlirLocationIsAFused(raw) { mlirLocationFusedGetNumLocations(raw) } else { 0 };
        if parts > 0 {
            // The C API writes every part; the buffer must hold them all.
            let mut all = vec![mlirLocationUnknownGet(mlirLocationGetContext(raw)); parts as usize];
            mlirLocationFusedGetLocations(raw, all.as_mut_ptr());
            return describe_location(Location::from_raw(all[0]));
        }
    }
    location.to_string()
}

/// Every place a (possibly fused) location names, `file:line:col` each,
/// distinct, in order, joined by `, ` (a fused kernel's `hl` ops).
pub fn describe_all_locations(location: Location<'_>) -> String {
    use mlir_sys::*;
    let raw = location.to_raw();
    let parts = unsafe { if mlirLocationIsAFused(raw) { mlirLocationFusedGetNumLocations(raw) } else { 0 } };
    if parts == 0 {
        return describe_location(location);
    }
    let mut all = vec![unsafe { mlirLocationUnknownGet(mlirLocationGetContext(raw)) }; parts as usize];
    unsafe { mlirLocationFusedGetLocations(raw, all.as_mut_ptr()) };
    let mut seen: Vec<String> = Vec::new();
    for part in all {
        let text = describe_all_locations(unsafe { Location::from_raw(part) });
        for piece in text.split(", ") {
            if !seen.iter().any(|s| s == piece) {
                seen.push(piece.to_string());
            }
        }
    }
    seen.join(", ")
}

fn convert(diagnostic: &melior::diagnostic::Diagnostic<'_>) -> Diagnostic {
    let severity = match diagnostic.severity() {
        DiagnosticSeverity::Error => Severity::Error,
        DiagnosticSeverity::Warning => Severity::Warning,
        DiagnosticSeverity::Note => Severity::Note,
        DiagnosticSeverity::Remark => Severity::Remark,
    };
    let notes =
        (0..diagnostic.note_count()).filter_map(|i| diagnostic.note(i).ok()).map(|note| convert(&note)).collect();
    Diagnostic { location: describe_location(diagnostic.location()), severity, message: diagnostic.to_string(), notes }
}

/// The deepest bracket nesting (`(`, `[`, `{`) a source may have: MLIR's
/// parser recurses per level and overflows the stack at a few thousand;
/// real IR nests tens deep.
pub const MAX_NESTING: usize = 1000;

/// `Ok` when `source`'s brackets (outside string literals and `//`
/// comments) nest at most `max` deep; else the line where they pass it,
/// and the depth.
pub fn nesting_within(source: &str, max: usize) -> std::result::Result<(), (usize, usize)> {
    let (mut depth, mut line) = (0usize, 1usize);
    let mut chars = source.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\n' => line += 1,
            '"' => {
                // A string literal, with its escapes.
                while let Some(s) = chars.next() {
                    match s {
                        '\\' => {
                            chars.next();
                        }
                        '"' => break,
                        '\n' => line += 1,
                        _ => {}
                    }
                }
            }
            '/' if chars.peek() == Some(&'/') => {
                for s in chars.by_ref() {
                    if s == '\n' {
                        line += 1;
                        break;
                    }
                }
            }
            '(' | '[' | '{' => {
                depth += 1;
                if depth > max {
                    return Err((line, depth));
                }
            }
            ')' | ']' | '}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    Ok(())
}
