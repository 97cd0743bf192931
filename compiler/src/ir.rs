//! Building operations through MLIR's C API, the way both the layer API's
//! tracer and Rust pass bodies create `hl` ops: attributes and types given
//! as MLIR text, result types either given or inferred by the op, and the
//! op verified before it is inserted anywhere. Failures leave their reasons
//! as diagnostics on the context (captured by `CompilerContext`, or printed
//! by `aicf-opt`).

use crate::ffi::string_ref;
use mlir_sys::*;

/// Why an op could not be created.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum BuildError {
    /// An attribute or type text did not parse: a bug in the caller.
    Syntax(String),
    /// The op refused its operands or attributes (inference or verifier);
    /// the diagnostics say why.
    Refused,
}

pub(crate) fn parse_type(ctx: MlirContext, text: &str) -> Result<MlirType, BuildError> {
    let t = unsafe { mlirTypeParseGet(ctx, string_ref(text)) };
    if t.ptr.is_null() { Err(BuildError::Syntax(format!("type `{text}`"))) } else { Ok(t) }
}

pub(crate) fn parse_attribute(ctx: MlirContext, text: &str) -> Result<MlirAttribute, BuildError> {
    let a = unsafe { mlirAttributeParseGet(ctx, string_ref(text)) };
    if a.ptr.is_null() { Err(BuildError::Syntax(format!("attribute `{text}`"))) } else { Ok(a) }
}

/// What to build.
pub(crate) struct OpSpec<'a> {
    pub name: &'a str,
    pub operands: &'a [MlirValue],
    /// `(name, MLIR text of the attribute)`.
    pub attributes: &'a [(&'a str, String)],
    /// Result types; `None` lets the op infer them.
    pub results: Option<&'a [MlirType]>,
    /// Run the op's verifier before returning it. Ops whose verifier needs
    /// their parent (`func.return`, `hl.param`) are verified in place later.
    pub verify: bool,
    /// Regions the op takes ownership of.
    pub regions: &'a [MlirRegion],
}

impl<'a> OpSpec<'a> {
    pub fn new(name: &'a str) -> Self {
        OpSpec { name, operands: &[], attributes: &[], results: None, verify: true, regions: &[] }
    }
}

/// Creates a detached op; the caller owns it (insert it into a block, or
/// destroy it).
pub(crate) fn create_op(ctx: MlirContext, location: MlirLocation, spec: &OpSpec<'_>) -> Result<MlirOperation, BuildError> {
    let mut named = Vec::with_capacity(spec.attributes.len());
    for (key, text) in spec.attributes {
        let attr = parse_attribute(ctx, text)?;
        named.push(unsafe { mlirNamedAttributeGet(mlirIdentifierGet(ctx, string_ref(key)), attr) });
    }
    let op = unsafe {
        let mut state = mlirOperationStateGet(string_ref(spec.name), location);
        mlirOperationStateAddOperands(&mut state, spec.operands.len() as isize, spec.operands.as_ptr());
        mlirOperationStateAddAttributes(&mut state, named.len() as isize, named.as_ptr());
        mlirOperationStateAddOwnedRegions(&mut state, spec.regions.len() as isize, spec.regions.as_ptr());
        match spec.results {
            Some(types) => mlirOperationStateAddResults(&mut state, types.len() as isize, types.as_ptr()),
            None => mlirOperationStateEnableResultTypeInference(&mut state),
        }
        mlirOperationCreate(&mut state)
    };
    if op.ptr.is_null() {
        return Err(BuildError::Refused);
    }
    if spec.verify && !unsafe { mlirOperationVerify(op) } {
        unsafe { mlirOperationDestroy(op) };
        return Err(BuildError::Refused);
    }
    Ok(op)
}
