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
        if let Err(TooDeep { line, message }) = nesting_within(source, MAX_NESTING) {
            return Err(CompileError::Parse {
                source_name: source_name.to_string(),
                diagnostics: vec![Diagnostic {
                    location: format!("{source_name}:{line}"),
                    severity: Severity::Error,
                    message,
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
        // Two top-level modules parse as one holding both, in which no
        // function was found ("no @loss to train").
        use melior::ir::BlockLike;
        let ops: Vec<_> = module
            .body()
            .first_operation()
            .into_iter()
            .flat_map(|first| std::iter::successors(Some(first), |op| op.next_in_block()))
            .collect();
        let is_module =
            |op: &melior::ir::OperationRef| op.name().as_string_ref().as_str().ok() == Some("builtin.module");
        let nested: Vec<String> =
            ops.iter().filter(|op| is_module(op)).map(|op| describe_location(op.location())).collect();
        if let Some(first) = nested.first() {
            // Functions beside the modules are a module of their own (the
            // file's top level).
            let modules = nested.len() + usize::from(ops.iter().any(|op| !is_module(op)));
            let message = if modules > 1 {
                format!("the file holds {modules} modules; a model is one module")
            } else {
                "a module inside the model's module; a model is one module".to_string()
            };
            return Err(CompileError::Parse {
                source_name: source_name.to_string(),
                diagnostics: vec![Diagnostic {
                    location: first.clone(),
                    severity: Severity::Error,
                    message,
                    notes: vec![],
                }],
            });
        }
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
        // (A file that cannot be read is no parse error: "not valid IR"
        // said of a missing file misled.)
        let source = std::fs::read_to_string(path)
            .map_err(|e| CompileError::Io { path: path.display().to_string(), message: e.to_string() })?;
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

/// The text of the MLIR bytecode `bytes` (`aicf-opt --emit-bytecode`'s,
/// named `source_name` in errors), with its locations (`loc(...)`), so
/// that errors name the places the bytecode kept.
pub fn bytecode_text(bytes: &[u8], source_name: &str) -> Result<String> {
    use melior::ir::operation::{OperationLike as _, OperationPrintingFlags};
    let ctx = CompilerContext::new();
    ctx.take_diagnostics();
    let raw = unsafe {
        ffi::aicfParseModule(
            ctx.context.to_raw(),
            mlir_sys::MlirStringRef { data: bytes.as_ptr().cast(), length: bytes.len() },
            ffi::string_ref(source_name),
        )
    };
    let Some(module) = (unsafe { Module::from_option_raw(raw) }) else {
        return Err(CompileError::Parse { source_name: source_name.to_string(), diagnostics: ctx.take_diagnostics() });
    };
    module
        .as_operation()
        .to_string_with_flags(OperationPrintingFlags::new().enable_debug_info(true, false))
        .map_err(|e| CompileError::Internal(format!("{source_name}: printing its bytecode as text: {e}")))
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
        // An inlined op: where it is written (a note names the call, as
        // MLIR's own handler does). The call was named alone, so an error
        // in @forward pointed at `call @forward` in @loss.
        if mlirLocationIsACallSite(raw) {
            return describe_location(Location::from_raw(mlirLocationCallSiteGetCallee(raw)));
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
    let mut notes: Vec<Diagnostic> =
        (0..diagnostic.note_count()).filter_map(|i| diagnostic.note(i).ok()).map(|note| convert(&note)).collect();
    let raw = diagnostic.location().to_raw();
    // SAFETY: a location of the diagnostic's context, alive while it is.
    if unsafe { mlir_sys::mlirLocationIsACallSite(raw) } {
        let caller = unsafe { Location::from_raw(mlir_sys::mlirLocationCallSiteGetCaller(raw)) };
        notes.push(Diagnostic {
            location: describe_location(caller),
            severity: Severity::Note,
            message: "called from here".into(),
            notes: Vec::new(),
        });
    }
    Diagnostic { location: describe_location(diagnostic.location()), severity, message: diagnostic.to_string(), notes }
}

/// The deepest bracket nesting (`(`, `[`, `{`, `<`) a source may have:
/// MLIR's parser recurses per level and overflows the stack at a few
/// thousand; real IR nests tens deep.
pub const MAX_NESTING: usize = 1000;

/// The most binary operators (`+ - * mod floordiv ceildiv`) one affine
/// expression may chain at one level: the parser recurses per term (80,000
/// overflow its stack); real maps have a handful.
pub const MAX_CHAIN: usize = 10_000;

/// Where and why a source is refused before MLIR parses it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TooDeep {
    pub line: usize,
    pub message: String,
}

/// `Ok` when `source`'s brackets (outside string literals and `//`
/// comments) nest at most `max` deep and no expression chains more than
/// [`MAX_CHAIN`] operators at one level; else the line where it passes
/// the bound, and what passed it. `>` closes an angle bracket except in
/// `->` and `>=`; `,`, `;`, `=` and `:` end a chain, and a bracket gives
/// its contents a chain of their own.
pub fn nesting_within(source: &str, max: usize) -> std::result::Result<(), TooDeep> {
    let mut line = 1usize;
    // One chain length per open bracket, the outermost level first.
    let mut chains: Vec<usize> = vec![0];
    // Where the word (identifier, number) being read began.
    let mut word: Option<usize> = None;
    let bytes = source.as_bytes();
    let operator_word = |w: &[u8]| matches!(w, b"mod" | b"floordiv" | b"ceildiv");
    let mut i = 0usize;
    let count = |chains: &mut Vec<usize>, line: usize| -> std::result::Result<(), TooDeep> {
        // The outermost level is never popped: there is always a top.
        let Some(top) = chains.last_mut() else { return Ok(()) };
        *top += 1;
        if *top > MAX_CHAIN {
            return Err(TooDeep {
                line,
                message: format!(
                    "an expression here chains more than {MAX_CHAIN} operators; AICF reads at most {MAX_CHAIN} \
                     (the parser recurses per term)"
                ),
            });
        }
        Ok(())
    };
    while i < bytes.len() {
        let c = bytes[i];
        let next = bytes.get(i + 1).copied();
        let prev = if i > 0 { bytes[i - 1] } else { b' ' };
        if c.is_ascii_alphanumeric() || c == b'_' || c == b'$' || c == b'.' {
            word.get_or_insert(i);
            i += 1;
            continue;
        }
        if let Some(start) = word.take()
            && operator_word(&bytes[start..i])
        {
            count(&mut chains, line)?;
        }
        let exponent = |at: usize| {
            // `1.5e-3`: a sign after an exponent letter that follows a digit.
            at >= 2 && matches!(bytes[at - 1], b'e' | b'E') && bytes[at - 2].is_ascii_digit()
        };
        match c {
            b'\n' => line += 1,
            b'"' => {
                // A string literal, with its escapes.
                i += 1;
                while i < bytes.len() {
                    match bytes[i] {
                        b'\\' => i += 1,
                        b'"' => break,
                        b'\n' => line += 1,
                        _ => {}
                    }
                    i += 1;
                }
            }
            b'/' if next == Some(b'/') => {
                while i < bytes.len() && bytes[i] != b'\n' {
                    i += 1;
                }
                continue;
            }
            b'%' | b'@' | b'^' | b'#' | b'!' => {
                // A name: its characters (`-` among them) are no operators.
                while i + 1 < bytes.len() && (bytes[i + 1].is_ascii_alphanumeric() || b"_$.-".contains(&bytes[i + 1])) {
                    i += 1;
                }
            }
            b'(' | b'[' | b'{' | b'<' => {
                chains.push(0);
                if chains.len() - 1 > max {
                    return Err(TooDeep {
                        line,
                        message: format!(
                            "brackets nest {} deep here; AICF reads at most {max} levels (the parser recurses per level)",
                            chains.len() - 1
                        ),
                    });
                }
            }
            b'>' if prev == b'-' || next == Some(b'=') => {}
            b')' | b']' | b'}' | b'>' => {
                if chains.len() > 1 {
                    chains.pop();
                }
            }
            b',' | b';' | b'=' | b':' => {
                if let Some(top) = chains.last_mut() {
                    *top = 0;
                }
            }
            b'-' if next == Some(b'>') || exponent(i) => {}
            b'+' if exponent(i) => {}
            b'+' | b'-' | b'*' => count(&mut chains, line)?,
            _ => {}
        }
        i += 1;
    }
    if let Some(start) = word
        && operator_word(&bytes[start..])
    {
        count(&mut chains, line)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{MAX_CHAIN, nesting_within};

    fn chain(op: &str, terms: usize) -> String {
        format!("#m = affine_map<(d0) -> ({}d0)>\n", format!("d0 {op} ").repeat(terms))
    }

    #[test]
    fn angle_brackets_nest_but_arrows_and_comparisons_do_not_close() {
        assert!(nesting_within("func.func @f(%a: tensor<4xf32>) -> tensor<4xf32>", 2).is_ok());
        let deep = format!("{}f32{}", "tuple<".repeat(5), ">".repeat(5));
        assert_eq!(nesting_within(&deep, 4).unwrap_err().line, 1);
        // `->` and `>=` close nothing: three levels stay open.
        let arrows = "<<< (d0) -> (d0), (d0 >= 0) ->";
        assert!(nesting_within(&format!("{arrows} (<"), 4).is_err());
        assert!(nesting_within(&format!("{arrows} ("), 4).is_ok());
    }

    #[test]
    fn long_operator_chains_are_refused_and_separators_end_them() {
        for op in ["+", "-", "*", "floordiv", "mod", "ceildiv"] {
            assert!(nesting_within(&chain(op, MAX_CHAIN), 10).is_ok(), "{op}");
            let e = nesting_within(&format!("\n{}", chain(op, MAX_CHAIN + 1)), 10).unwrap_err();
            assert_eq!(e.line, 2, "{op}");
            assert!(e.message.contains("chains more than"), "{}", e.message);
        }
        // A dense literal's signs are separated by commas; exponents, names
        // and arrows hold no operators; a bracket's contents chain apart.
        let n = MAX_CHAIN + 5;
        let dense = format!("dense<[{}1.0]>", "-1.5e-3, ".repeat(n));
        assert!(nesting_within(&dense, 10).is_ok());
        let names = format!("{}\n", "%a-b-c = hl.x %d-e ".repeat(n));
        assert!(nesting_within(&names, 10).is_ok());
        let bracketed = format!("({})", "(d0 + 1) ".repeat(n));
        assert!(nesting_within(&bracketed, 10).is_ok());
        let parenthesised_chain = format!("({}d0)", "(d0) + ".repeat(n));
        assert!(nesting_within(&parenthesised_chain, 10).is_err());
        // Strings and comments are skipped.
        let quoted = format!("\"{}\" // {}\n", "+".repeat(n), "*".repeat(n));
        assert!(nesting_within(&quoted, 10).is_ok());
    }
}
