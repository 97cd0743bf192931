//! Building and reading operations through MLIR's C API, shared by the
//! layer API's tracer, the Rust pass bodies and the reference interpreter.
//!
//! Building: attributes and types given as MLIR text, result types either
//! given or inferred by the op, and the op verified before it is inserted
//! anywhere. Failures leave their reasons as diagnostics on the context
//! (captured by `CompilerContext`, or printed by `aicf-opt`).
//!
//! Reading: an absent or differently kinded attribute reads as `None` (or
//! empty); callers decide whether that is an error.

use crate::{
    ffi::{self, string_ref},
    types::{DType, TensorSpec},
};
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
pub(crate) fn create_op(
    ctx: MlirContext,
    location: MlirLocation,
    spec: &OpSpec<'_>,
) -> Result<MlirOperation, BuildError> {
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

/// The attribute `key` of argument `i` of `func` (its `arg_attrs`
/// dictionary), where it has one.
fn arg_attr(func: MlirOperation, i: usize, key: &str) -> Option<MlirAttribute> {
    let attrs = attr(func, "arg_attrs");
    unsafe {
        if attrs.ptr.is_null() || !mlirAttributeIsAArray(attrs) || i as isize >= mlirArrayAttrGetNumElements(attrs) {
            return None;
        }
        let dict = mlirArrayAttrGetElement(attrs, i as isize);
        if !mlirAttributeIsADictionary(dict) {
            return None;
        }
        let value = mlirDictionaryAttrGetElementByName(dict, crate::ffi::string_ref(key));
        (!value.ptr.is_null()).then_some(value)
    }
}

/// The float attribute `key` of argument `i` of `func`, where it has one.
pub(crate) fn arg_float_attr(func: MlirOperation, i: usize, key: &str) -> Option<f64> {
    let value = arg_attr(func, i, key)?;
    unsafe { mlirAttributeIsAFloat(value).then(|| mlirFloatAttrGetValueDouble(value)) }
}

/// The string attribute `key` of argument `i` of `func` (an imported
/// model's `hl.name`), where it has one.
pub(crate) fn arg_string_attr(func: MlirOperation, i: usize, key: &str) -> Option<String> {
    let value = arg_attr(func, i, key)?;
    unsafe { mlirAttributeIsAString(value).then(|| ffi::to_string(mlirStringAttrGetValue(value))) }
}

/// Ends `region`'s (single) block with `func.return outputs` and wraps the
/// region in `func.func @name` (argument types from the block), with
/// `attributes` added (`arg_attrs`, `res_attrs`). The function is not
/// verified here (its uses of symbols need the module). On failure the
/// region is freed.
pub(crate) fn create_function(
    ctx: MlirContext,
    location: MlirLocation,
    name: &str,
    region: MlirRegion,
    outputs: &[MlirValue],
    attributes: &[(&str, String)],
) -> Result<MlirOperation, BuildError> {
    let built = (|| {
        let block = unsafe { mlirRegionGetFirstBlock(region) };
        let ret = create_op(
            ctx,
            location,
            &OpSpec { operands: outputs, results: Some(&[]), verify: false, ..OpSpec::new("func.return") },
        )?;
        unsafe { mlirBlockAppendOwnedOperation(block, ret) };
        let args: Vec<String> = (0..unsafe { mlirBlockGetNumArguments(block) })
            .map(|i| type_text(unsafe { mlirValueGetType(mlirBlockGetArgument(block, i)) }))
            .collect();
        let results: Vec<String> = outputs.iter().map(|&v| type_text(unsafe { mlirValueGetType(v) })).collect();
        let mut attrs = vec![
            ("sym_name", quoted(name)),
            ("function_type", format!("({}) -> ({})", args.join(", "), results.join(", "))),
        ];
        attrs.extend(attributes.iter().cloned());
        Ok(attrs)
    })();
    let attrs = match built {
        Ok(attrs) => attrs,
        Err(e) => {
            unsafe { mlirRegionDestroy(region) };
            return Err(e);
        }
    };
    let spec = OpSpec {
        attributes: &attrs,
        results: Some(&[]),
        regions: &[region],
        verify: false,
        ..OpSpec::new("func.func")
    };
    // The region is handed over only once the op exists.
    create_op(ctx, location, &spec).inspect_err(|_| unsafe { mlirRegionDestroy(region) })
}

// ---------------------------------------------------------------------------
// Reading
// ---------------------------------------------------------------------------

/// A value's identity, for maps keyed by value.
pub(crate) fn key(v: MlirValue) -> usize {
    v.ptr as usize
}

/// In the ops nested in `copy`'s regions (a clone of an op whose regions
/// read values of its own function: a fused body reading a constant that
/// canonicalization hoisted out of it), each operand `map` maps (a value
/// of the function the op was cloned from, by [`key`]) read as its image:
/// `mlirOperationClone` maps the values its regions define, not those they
/// capture, which were left reading the other function's values.
pub(crate) fn remap_captured(copy: MlirOperation, map: &std::collections::HashMap<usize, MlirValue>) {
    for r in 0..unsafe { mlirOperationGetNumRegions(copy) } {
        let mut block = unsafe { mlirRegionGetFirstBlock(mlirOperationGetRegion(copy, r)) };
        while !block.ptr.is_null() {
            let mut op = unsafe { mlirBlockGetFirstOperation(block) };
            while !op.ptr.is_null() {
                for i in 0..unsafe { mlirOperationGetNumOperands(op) } {
                    if let Some(v) = map.get(&key(unsafe { mlirOperationGetOperand(op, i) })) {
                        unsafe { mlirOperationSetOperand(op, i, *v) };
                    }
                }
                remap_captured(op, map);
                op = unsafe { mlirOperationGetNextInBlock(op) };
            }
            block = unsafe { mlirBlockGetNextInRegion(block) };
        }
    }
}

/// The element type of a scalar or tensor type, if hl knows it.
pub(crate) fn element_dtype(t: MlirType) -> Option<DType> {
    unsafe {
        let e = if mlirTypeIsAShaped(t) { mlirShapedTypeGetElementType(t) } else { t };
        if mlirTypeIsAF32(e) {
            Some(DType::F32)
        } else if mlirTypeIsAF64(e) {
            Some(DType::F64)
        } else if mlirTypeIsAF16(e) {
            Some(DType::F16)
        } else if mlirTypeIsABF16(e) {
            Some(DType::BF16)
        } else if mlirTypeIsAInteger(e) {
            match mlirIntegerTypeGetWidth(e) {
                1 => Some(DType::I1),
                32 => Some(DType::I32),
                64 => Some(DType::I64),
                _ => None,
            }
        } else {
            None
        }
    }
}

/// The shape and dtype of a value. A value that is not a ranked tensor of
/// an hl element type (possible only outside hl) reads as an i1 scalar,
/// which no pass treats as data.
pub(crate) fn spec(v: MlirValue) -> TensorSpec {
    crate::nn::spec_of_type(unsafe { mlirValueGetType(v) }).unwrap_or(TensorSpec::new([], DType::I1))
}

/// The shape and dtype of a ranked tensor or memref value (None for any
/// other type).
pub(crate) fn buffer_spec(v: MlirValue) -> Option<TensorSpec> {
    unsafe {
        let t = mlirValueGetType(v);
        if !mlirTypeIsAShaped(t) || !mlirShapedTypeHasRank(t) {
            return None;
        }
        let shape = (0..mlirShapedTypeGetRank(t))
            .map(|i| mlirShapedTypeGetDimSize(t, i as isize).max(0) as usize)
            .collect::<Vec<_>>();
        Some(TensorSpec::new(shape, element_dtype(t)?))
    }
}

/// Bytes of one element of `dtype` (i1 stored as a byte).
pub(crate) fn dtype_bytes(dtype: DType) -> u64 {
    match dtype {
        DType::F16 | DType::BF16 => 2,
        DType::F64 | DType::I64 => 8,
        DType::I1 => 1,
        DType::F32 | DType::I32 => 4,
    }
}

/// The `func.func`s of `module` that have a body, with their entry block.
pub(crate) fn functions(module: MlirOperation) -> Vec<(MlirOperation, MlirBlock)> {
    let body = unsafe { mlirRegionGetFirstBlock(mlirOperationGetRegion(module, 0)) };
    ops_of(body)
        .into_iter()
        .filter(|&op| op_name(op) == "func.func")
        .map(|f| (f, unsafe { mlirRegionGetFirstBlock(mlirOperationGetRegion(f, 0)) }))
        .filter(|(_, b)| !b.ptr.is_null())
        .collect()
}

/// A detached `memref.alloc() : ty`.
pub(crate) fn alloc(ctx: MlirContext, location: MlirLocation, ty: MlirType) -> Result<MlirOperation, BuildError> {
    create_op(
        ctx,
        location,
        &OpSpec {
            attributes: &[("operandSegmentSizes", "array<i32: 0, 0>".into())],
            results: Some(&[ty]),
            ..OpSpec::new("memref.alloc")
        },
    )
}

pub(crate) fn ops_of(block: MlirBlock) -> Vec<MlirOperation> {
    let mut out = Vec::new();
    // A region without a block (a declaration's) has no operations.
    if block.ptr.is_null() {
        return out;
    }
    let mut op = unsafe { mlirBlockGetFirstOperation(block) };
    while !op.ptr.is_null() {
        out.push(op);
        op = unsafe { mlirOperationGetNextInBlock(op) };
    }
    out
}

pub(crate) fn operands(op: MlirOperation) -> Vec<MlirValue> {
    (0..unsafe { mlirOperationGetNumOperands(op) }).map(|i| unsafe { mlirOperationGetOperand(op, i) }).collect()
}

pub(crate) fn op_name(op: MlirOperation) -> String {
    unsafe { ffi::to_string(mlirIdentifierStr(mlirOperationGetName(op))) }
}

pub(crate) fn op_loc(op: MlirOperation) -> MlirLocation {
    unsafe { mlirOperationGetLocation(op) }
}

/// The op that defines `v`, if it is an op result.
pub(crate) fn producer(v: MlirValue) -> Option<MlirOperation> {
    unsafe { mlirValueIsAOpResult(v) }.then(|| unsafe { mlirOpResultGetOwner(v) })
}

/// The only user of `v`, if it has exactly one use.
pub(crate) fn single_user(v: MlirValue) -> Option<MlirOperation> {
    let first = unsafe { mlirValueGetFirstUse(v) };
    if first.ptr.is_null() || !unsafe { mlirOpOperandGetNextUse(first) }.ptr.is_null() {
        return None;
    }
    Some(unsafe { mlirOpOperandGetOwner(first) })
}

/// The ops using `v`, once per use (an op using `v` twice appears twice).
pub(crate) fn users(v: MlirValue) -> Vec<MlirOperation> {
    let mut out = Vec::new();
    let mut u = unsafe { mlirValueGetFirstUse(v) };
    while !u.ptr.is_null() {
        out.push(unsafe { mlirOpOperandGetOwner(u) });
        u = unsafe { mlirOpOperandGetNextUse(u) };
    }
    out
}

/// The attribute `key` (inherent or discardable); null when absent.
pub(crate) fn attr(op: MlirOperation, key: &str) -> MlirAttribute {
    unsafe { mlirOperationGetAttributeByName(op, string_ref(key)) }
}

pub(crate) fn has(op: MlirOperation, key: &str) -> bool {
    !attr(op, key).ptr.is_null()
}

pub(crate) fn string_attr(op: MlirOperation, key: &str) -> Option<String> {
    let a = attr(op, key);
    (!a.ptr.is_null() && unsafe { mlirAttributeIsAString(a) })
        .then(|| unsafe { ffi::to_string(mlirStringAttrGetValue(a)) })
}

/// `s` as an MLIR string literal, quoted: `"` and `\` escaped, and every
/// byte outside printable ASCII (a newline, UTF-8) as `\XX`, as MLIR
/// prints them. A name built into attribute text unescaped broke the text
/// (`@"fc.a\22b"` became `"fc.a"b.exp_avg"`).
pub fn quoted(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for b in s.bytes() {
        match b {
            b'"' | b'\\' => out.push_str(&format!("\\{b:02X}")),
            0x20..=0x7e => out.push(b as char),
            _ => out.push_str(&format!("\\{b:02X}")),
        }
    }
    out.push('"');
    out
}

/// `@"name"`: a symbol reference to `name`, quoted as [`quoted`].
pub fn symbol_ref(name: &str) -> String {
    format!("@{}", quoted(name))
}

pub(crate) fn flat_symbol(op: MlirOperation, key: &str) -> Option<String> {
    let a = attr(op, key);
    (!a.ptr.is_null() && unsafe { mlirAttributeIsAFlatSymbolRef(a) })
        .then(|| unsafe { ffi::to_string(mlirFlatSymbolRefAttrGetValue(a)) })
}

/// An integer attribute; hl's enums (I32EnumAttr) read as their case value.
pub(crate) fn int_attr(op: MlirOperation, key: &str) -> Option<i64> {
    let a = attr(op, key);
    (!a.ptr.is_null() && unsafe { mlirAttributeIsAInteger(a) }).then(|| unsafe { mlirIntegerAttrGetValueInt(a) })
}

pub(crate) fn float_attr(op: MlirOperation, key: &str) -> Option<f64> {
    let a = attr(op, key);
    (!a.ptr.is_null() && unsafe { mlirAttributeIsAFloat(a) }).then(|| unsafe { mlirFloatAttrGetValueDouble(a) })
}

pub(crate) fn i64_array(op: MlirOperation, key: &str) -> Option<Vec<i64>> {
    let a = attr(op, key);
    (!a.ptr.is_null() && unsafe { mlirAttributeIsADenseI64Array(a) }).then(|| {
        (0..unsafe { mlirDenseArrayGetNumElements(a) }).map(|i| unsafe { mlirDenseI64ArrayGetElement(a, i) }).collect()
    })
}

pub(crate) fn i32_array(op: MlirOperation, key: &str) -> Option<Vec<i64>> {
    let a = attr(op, key);
    (!a.ptr.is_null() && unsafe { mlirAttributeIsADenseI32Array(a) }).then(|| {
        (0..unsafe { mlirDenseArrayGetNumElements(a) })
            .map(|i| unsafe { mlirDenseI32ArrayGetElement(a, i) } as i64)
            .collect()
    })
}

/// An attribute printed as MLIR text (to copy it onto another op); empty
/// when absent.
pub(crate) fn attr_text(op: MlirOperation, key: &str) -> String {
    attr_text_raw(attr(op, key))
}

/// An attribute's text; empty for a null attribute.
pub(crate) fn attr_text_raw(a: MlirAttribute) -> String {
    if a.ptr.is_null() { String::new() } else { unsafe { melior::ir::Attribute::from_raw(a) }.to_string() }
}

pub(crate) fn type_text(t: MlirType) -> String {
    unsafe { melior::ir::Type::from_raw(t) }.to_string()
}

/// `array<i64: ...>` attribute text.
pub(crate) fn i64_array_text(values: &[usize]) -> String {
    let items: Vec<String> = values.iter().map(usize::to_string).collect();
    format!("array<i64: {}>", items.join(", "))
}

/// The value of a splat `hl.constant` of a float or integer type (every
/// element of any shape is it).
pub(crate) fn splat_value(v: MlirValue) -> Option<f64> {
    let op = producer(v)?;
    if op_name(op) != "hl.constant" {
        return None;
    }
    let a = attr(op, "value");
    if a.ptr.is_null() || unsafe { !mlirAttributeIsADenseElements(a) || !mlirDenseElementsAttrIsSplat(a) } {
        return None;
    }
    unsafe {
        Some(match spec(v).dtype {
            DType::F32 => mlirDenseElementsAttrGetFloatSplatValue(a) as f64,
            DType::F64 => mlirDenseElementsAttrGetDoubleSplatValue(a),
            DType::I32 => mlirDenseElementsAttrGetInt32SplatValue(a) as f64,
            DType::I64 => mlirDenseElementsAttrGetInt64SplatValue(a) as f64,
            DType::I1 => mlirDenseElementsAttrGetBoolSplatValue(a) as f64,
            DType::F16 | DType::BF16 => return None,
        })
    }
}

/// An operation printed as MLIR text in its own scope: SSA names are
/// numbered from the op itself and nothing around it is verified. The
/// default printer (`Display`) verifies and numbers the whole enclosing
/// module before printing one op, so printing each kernel of a module that
/// way costs the square of the module's size.
pub(crate) fn op_text_local(op: MlirOperation) -> String {
    unsafe extern "C" fn append(s: MlirStringRef, data: *mut std::ffi::c_void) {
        let out = unsafe { &mut *(data as *mut Vec<u8>) };
        out.extend_from_slice(unsafe { std::slice::from_raw_parts(s.data as *const u8, s.length) });
    }
    let mut out: Vec<u8> = Vec::new();
    unsafe {
        let flags = mlirOpPrintingFlagsCreate();
        mlirOpPrintingFlagsUseLocalScope(flags);
        mlirOpPrintingFlagsAssumeVerified(flags);
        mlirOperationPrintWithFlags(op, flags, Some(append), &mut out as *mut Vec<u8> as *mut std::ffi::c_void);
        mlirOpPrintingFlagsDestroy(flags);
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// What an op computes, as text for a content key: the op printed in its
/// own scope without its place in the schedule (`ll.stream`, `ll.wait`,
/// `ll.event`), which does not change the code it runs.
pub(crate) fn region_text(op: MlirOperation) -> String {
    unsafe {
        let clone = mlirOperationClone(op);
        for key in ["ll.stream", "ll.wait", "ll.event"] {
            mlirOperationRemoveAttributeByName(clone, ffi::string_ref(key));
        }
        let text = op_text_local(clone);
        mlirOperationDestroy(clone);
        text
    }
}

/// Element `i` of a dense f16 or bf16 attribute `a` (of `dtype`), read from
/// its raw bytes (the C API has no 16-bit float getter); a splat holds one.
///
/// # Safety
/// `a` is a dense elements attribute of 16-bit floats with more than `i`
/// elements stored.
pub(crate) unsafe fn dense_16bit_element(a: MlirAttribute, i: isize, dtype: DType) -> f64 {
    let raw = unsafe { mlirDenseElementsAttrGetRawData(a) } as *const u8;
    let bits = unsafe { u16::from_le_bytes([*raw.offset(2 * i), *raw.offset(2 * i + 1)]) };
    match dtype {
        DType::F16 => half::f16::from_bits(bits).to_f64(),
        _ => half::bf16::from_bits(bits).to_f64(),
    }
}

/// `v` as MLIR float literal text: MLIR reads `8e0` as an integer followed
/// by garbage, so the mantissa always has a point (`8.0e0`, `-1.5e-3`).
pub(crate) fn float_literal(v: f64) -> String {
    let s = format!("{v:e}");
    match s.split_once('e') {
        Some((mantissa, exp)) if !mantissa.contains('.') => format!("{mantissa}.0e{exp}"),
        _ => s,
    }
}
