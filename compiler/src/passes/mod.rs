//! AICF's passes. Each is declared in `dialects/include/aicf/Transforms/Passes.td`
//! (argument, summary, description, typed options); the C++ shell TableGen
//! generates parses the options and calls the body registered here.
//!
//! A body receives the operation the pass is anchored on and the parsed
//! options. It reports problems as MLIR diagnostics on the offending op
//! ([`emit_error`]) and returns [`PassFailed`]; it never panics on bad input.
//! A panic (an AICF bug) is caught at the FFI boundary and turned into an
//! "internal compiler error" diagnostic and a pass failure, since unwinding
//! into C++ would abort the process.

mod autocast;
mod autodiff;
mod bucket_collectives;
pub(crate) mod common;
mod convert_to_ll;
mod fuse_attention;
mod fuse_elementwise;
mod fuse_gemm;
mod fuse_optimizer;
mod fuse_reductions;
pub mod grow;
pub mod grow_stream;
mod optimizer;
mod pad_contractions;
pub(crate) mod plan_memory;
mod print_param_table;
mod schedule;
mod set_batch;

pub use autodiff::{FusedAttention, differentiate};
pub use bucket_collectives::bucket_collectives;
pub use convert_to_ll::convert_to_ll;
pub use fuse_attention::fuse_attention;
pub(crate) use fuse_elementwise::ROUNDS;
pub use fuse_elementwise::fuse_elementwise;
pub use fuse_gemm::fuse_gemm_epilogues;
pub use fuse_optimizer::fuse_optimizer;
pub use fuse_reductions::fuse_reductions;
pub use optimizer::{ACCUMULATOR_SLOT, FIRST_MICRO_BATCH, Optimizer, REPLICA_WEIGHT, add_train_step};
pub use plan_memory::{Budget, MemoryPlan, plan_memory};
pub use print_param_table::{ParamInfo, collect_params, render_table};
pub use schedule::{Schedule, schedule};
pub(crate) use set_batch::retype_function;

use crate::ffi;
use melior::ir::{Location, OperationRef, operation::OperationLike};
use mlir_sys::{MlirLogicalResult, MlirOperation, MlirStringRef};
use std::{collections::BTreeMap, ffi::c_void, panic::AssertUnwindSafe, sync::Once};

/// Returned by a pass body after it emitted its diagnostics.
#[derive(Debug)]
pub struct PassFailed;

pub type PassResult = Result<(), PassFailed>;

/// A pass body: the anchored operation and the pass's options.
pub type PassBody = for<'c, 'a> fn(OperationRef<'c, 'a>, &PassOptions) -> PassResult;

/// Every pass body, keyed by the pass argument declared in Passes.td.
const PASS_BODIES: &[(&str, PassBody)] = &[
    ("convert-hl-to-ll", convert_to_ll::run),
    ("hl-add-heads", grow::run_heads),
    ("hl-autocast", autocast::run),
    ("hl-autodiff", autodiff::run),
    ("hl-deepen", grow::run_deepen),
    ("hl-fuse-attention", fuse_attention::run),
    ("hl-fuse-elementwise", fuse_elementwise::run),
    ("hl-fuse-gemm-epilogue", fuse_gemm::run),
    ("hl-fuse-optimizer", fuse_optimizer::run),
    ("hl-fuse-reductions", fuse_reductions::run),
    ("hl-optimizer", optimizer::run),
    ("hl-pad-contractions", pad_contractions::run),
    ("hl-print-param-table", print_param_table::run),
    ("hl-set-batch", set_batch::run),
    ("hl-insert-block", grow_stream::run_block),
    ("hl-widen", grow::run_widen),
    ("hl-widen-residual", grow_stream::run_residual),
    ("ll-bucket-collectives", bucket_collectives::run),
    ("ll-plan-memory", plan_memory::run),
    ("ll-schedule", schedule::run),
];

/// The passes that rewrite a model's forward, refused on a differentiated
/// module ([`common::differentiated`]). (Not `hl-pad-contractions`: its
/// rewrite keeps every value, so it pads a gradient function as well.)
const FORWARD_ONLY: &[&str] =
    &["hl-set-batch", "hl-autocast", "hl-widen", "hl-add-heads", "hl-deepen", "hl-insert-block", "hl-widen-residual"];

/// Where and how the module `op` shows it is differentiated already (a
/// gradient function as `hl-autodiff` writes one, the optimizer's step
/// functions, a backward op), for the driver to refuse a model file that
/// holds one.
pub(crate) fn differentiated(op: mlir_sys::MlirOperation) -> Option<(mlir_sys::MlirLocation, String)> {
    common::differentiated(op)
}

/// Why pass `argument` refuses the module `op` before its body runs, at
/// which place.
fn refused(argument: &str, op: mlir_sys::MlirOperation) -> Option<(mlir_sys::MlirLocation, String)> {
    if !(argument.starts_with("hl-") || argument == "convert-hl-to-ll") {
        return None;
    }
    common::declaration(op)
        .or_else(|| common::nested_module(op))
        .or_else(|| {
            let (loc, what) = common::lowered(op).filter(|_| argument != "hl-print-param-table")?;
            Some((
                loc,
                format!(
                    "the module is lowered to ll already ({what}): the hl passes and convert-hl-to-ll run once, \
                     before the ll ones"
                ),
            ))
        })
        .or_else(|| {
            rewrites_forward(argument, common::differentiated(op), "differentiated", "hl-autodiff and hl-optimizer")
        })
        // A fused body's types and ops are its own: a retyping or a
        // rewrite of the forward changed its inputs, not its body.
        .or_else(|| rewrites_forward(argument, common::fused(op), "fused", "hl-fuse-elementwise"))
}

/// A pass that rewrites a model's forward (`FORWARD_ONLY`) refused on a
/// module `found` shows is `state` already (differentiated, fused): what
/// runs after `before`.
fn rewrites_forward(
    argument: &str,
    found: Option<(mlir_sys::MlirLocation, String)>,
    state: &str,
    before: &str,
) -> Option<(mlir_sys::MlirLocation, String)> {
    let (loc, what) = found.filter(|_| FORWARD_ONLY.contains(&argument))?;
    Some((
        loc,
        format!("the module is {state} already ({what}): {argument} rewrites a model's forward, before {before}"),
    ))
}

/// Installs every pass body and registers the passes (and AICF's named
/// pipelines) in MLIR's global registry. Idempotent; call before parsing a
/// textual pipeline or starting `aicf-opt`.
pub fn register_passes() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        for (argument, body) in PASS_BODIES {
            let entry: &'static BodyEntry = Box::leak(Box::new(BodyEntry { argument, body: *body }));
            unsafe {
                ffi::aicfSetPassBody(ffi::string_ref(argument), trampoline, entry as *const BodyEntry as *mut c_void)
            };
        }
        unsafe { ffi::aicfRegisterPasses() };
    });
}

struct BodyEntry {
    argument: &'static str,
    body: PassBody,
}

unsafe extern "C" fn trampoline(
    op: MlirOperation,
    options: MlirStringRef,
    user_data: *mut c_void,
) -> MlirLogicalResult {
    let entry = unsafe { &*(user_data as *const BodyEntry) };
    let op = unsafe { OperationRef::from_raw(op) };
    let options = unsafe { ffi::to_string(options) };
    let outcome = std::panic::catch_unwind(AssertUnwindSafe(|| match PassOptions::parse(&options) {
        // A tensor past what any size count holds is refused before the
        // pass computes with it.
        Ok(_) if let Some((loc, message)) = common::oversized(op.to_raw()) => {
            emit_error(unsafe { Location::from_raw(loc) }, &format!("{}: {message}", entry.argument));
            Err(PassFailed)
        }
        // The hl passes (not the ll ones, whose modules declare kernels)
        // refuse functions without a body, modules nested in theirs, a
        // module lowered already, and (those that rewrite a forward) one
        // differentiated already.
        Ok(_) if let Some((loc, message)) = refused(entry.argument, op.to_raw()) => {
            emit_error(unsafe { Location::from_raw(loc) }, &format!("{}: {message}", entry.argument));
            Err(PassFailed)
        }
        Ok(options) => (entry.body)(op, &options),
        Err(message) => {
            emit_error(op.location(), &format!("pass '{}': {message}", entry.argument));
            Err(PassFailed)
        }
    }));
    let ok = match outcome {
        Ok(Ok(())) => true,
        Ok(Err(PassFailed)) => false,
        Err(panic) => {
            let what = panic
                .downcast_ref::<String>()
                .map(String::as_str)
                .or_else(|| panic.downcast_ref::<&str>().copied())
                .unwrap_or("unknown panic");
            emit_error(op.location(), &format!("internal compiler error in pass '{}': {what}", entry.argument));
            false
        }
    };
    // mlirLogicalResultSuccess/Failure are inline in the C headers.
    MlirLogicalResult { value: if ok { 1 } else { 0 } }
}

/// Emits an error diagnostic at `location` through the context's handlers.
pub fn emit_error(location: Location<'_>, message: &str) {
    let text = std::ffi::CString::new(message.replace('\0', " ")).expect("NULs were replaced");
    unsafe { mlir_sys::mlirEmitError(location.to_raw(), text.as_ptr()) };
}

/// The options of one pass run, as MLIR printed them (`key=value` pairs
/// separated by spaces; values may be wrapped in `{...}`, `"..."` or `'...'`).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct PassOptions {
    values: BTreeMap<String, String>,
}

impl PassOptions {
    pub fn parse(text: &str) -> Result<Self, String> {
        let mut values = BTreeMap::new();
        let mut chars = text.char_indices().peekable();
        loop {
            while chars.next_if(|(_, c)| c.is_whitespace()).is_some() {}
            let Some(&(start, _)) = chars.peek() else { break };
            let mut key_end = text.len();
            while let Some(&(i, c)) = chars.peek() {
                if c == '=' || c.is_whitespace() {
                    key_end = i;
                    break;
                }
                chars.next();
            }
            let key = text[start..key_end].to_string();
            if chars.next_if(|(_, c)| *c == '=').is_none() {
                return Err(format!("option '{key}' has no value"));
            }
            let mut value = String::new();
            let mut depth = 0usize;
            let mut quote: Option<char> = None;
            while let Some(&(_, c)) = chars.peek() {
                match (quote, c) {
                    (Some(q), c) if c == q => quote = None,
                    (Some(_), _) => {}
                    (None, '"' | '\'') => quote = Some(c),
                    (None, '{') => depth += 1,
                    (None, '}') => depth = depth.saturating_sub(1),
                    (None, c) if c.is_whitespace() && depth == 0 => break,
                    _ => {}
                }
                value.push(c);
                chars.next();
            }
            let unwrapped = strip_wrapping(&value).to_string();
            values.insert(key, unwrapped);
        }
        Ok(Self { values })
    }

    /// The raw text of option `key`, or an error naming it.
    pub fn get(&self, key: &str) -> Result<&str, String> {
        self.values
            .get(key)
            .map(String::as_str)
            .ok_or_else(|| format!("option '{key}' was not passed (pass declaration and body disagree)"))
    }

    pub fn get_bool(&self, key: &str) -> Result<bool, String> {
        match self.get(key)? {
            "true" | "1" => Ok(true),
            "false" | "0" => Ok(false),
            other => Err(format!("option '{key}' expects true or false, got '{other}'")),
        }
    }

    pub fn get_i64(&self, key: &str) -> Result<i64, String> {
        let raw = self.get(key)?;
        raw.parse().map_err(|_| format!("option '{key}' expects an integer, got '{raw}'"))
    }

    pub fn get_f64(&self, key: &str) -> Result<f64, String> {
        let raw = self.get(key)?;
        raw.parse().map_err(|_| format!("option '{key}' expects a number, got '{raw}'"))
    }
}

fn strip_wrapping(value: &str) -> &str {
    for (open, close) in [('{', '}'), ('"', '"'), ('\'', '\'')] {
        if value.len() >= 2 && value.starts_with(open) && value.ends_with(close) {
            return &value[1..value.len() - 1];
        }
    }
    value
}

#[cfg(test)]
mod tests {
    use super::PassOptions;

    #[test]
    fn parses_printed_options() {
        let o = PassOptions::parse("group-by-owner=true require-params=false budget=1024").unwrap();
        assert!(o.get_bool("group-by-owner").unwrap());
        assert!(!o.get_bool("require-params").unwrap());
        assert_eq!(o.get_i64("budget").unwrap(), 1024);
        assert!(o.get("missing").unwrap_err().contains("'missing'"));
    }

    #[test]
    fn keeps_wrapped_values_whole() {
        let o = PassOptions::parse("pipeline={cse canonicalize} name=\"a b\" empty=").unwrap();
        assert_eq!(o.get("pipeline").unwrap(), "cse canonicalize");
        assert_eq!(o.get("name").unwrap(), "a b");
        assert_eq!(o.get("empty").unwrap(), "");
        assert!(PassOptions::parse("").unwrap().values.is_empty());
    }

    #[test]
    fn rejects_bad_values() {
        let o = PassOptions::parse("flag=maybe n=x").unwrap();
        assert!(o.get_bool("flag").unwrap_err().contains("expects true or false"));
        assert!(o.get_i64("n").unwrap_err().contains("expects an integer"));
        assert!(PassOptions::parse("novalue").unwrap_err().contains("no value"));
    }
}
