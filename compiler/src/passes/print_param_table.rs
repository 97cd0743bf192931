//! `hl-print-param-table`: the parameter table of an hl module.
//!
//! 1. Collect every `hl.param` directly in the module body, in order.
//! 2. For each, read its path, owner, tensor type and initializer.
//! 3. Print an aligned table to standard error, with a subtotal per owner
//!    when `group-by-owner` is set, and a total line.

use melior::ir::attribute::AttributeLike;

use super::{PassFailed, PassOptions, PassResult, emit_error};
use melior::ir::{
    BlockLike, OperationRef, RegionLike,
    attribute::{StringAttribute, TypeAttribute},
    operation::OperationLike,
    r#type::{DimSize, RankedTensorType, ShapedTypeLike},
};

/// One row of the table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParamInfo {
    pub path: String,
    pub owner: String,
    pub shape: Vec<u64>,
    pub dtype: String,
    pub init: String,
}

impl ParamInfo {
    pub fn elements(&self) -> u64 {
        self.shape.iter().product()
    }

    pub fn bytes(&self) -> u64 {
        self.elements() * dtype_bytes(&self.dtype)
    }
}

fn dtype_bytes(dtype: &str) -> u64 {
    match dtype {
        "f16" | "bf16" => 2,
        "f32" => 4,
        "f64" => 8,
        // hl.param's type constraint admits only the float types above.
        other => unreachable!("hl.param with element type {other} passed verification"),
    }
}

pub(super) fn run(module: OperationRef<'_, '_>, options: &PassOptions) -> PassResult {
    let report = |m: String| {
        emit_error(module.location(), &format!("hl-print-param-table: {m}"));
        PassFailed
    };
    let group_by_owner = options.get_bool("group-by-owner").map_err(report)?;
    let require_params = options.get_bool("require-params").map_err(report)?;

    let params = collect_params(module).map_err(|(op, message)| {
        emit_error(op.location(), &message);
        PassFailed
    })?;
    if params.is_empty() && require_params {
        emit_error(module.location(), "hl-print-param-table: the module declares no hl.param (require-params is set)");
        return Err(PassFailed);
    }
    eprint!("{}", render_table(&params, group_by_owner));
    Ok(())
}

/// The `hl.param` ops of `module`'s body, in order.
pub fn collect_params<'c, 'a>(module: OperationRef<'c, 'a>) -> Result<Vec<ParamInfo>, (OperationRef<'c, 'a>, String)> {
    let mut params = Vec::new();
    let Ok(region) = module.region(0) else { return Ok(params) };
    let Some(block) = region.first_block() else { return Ok(params) };
    let mut next = block.first_operation();
    while let Some(op) = next {
        next = op.next_in_block();
        if op.name().as_string_ref().as_str() != Ok("hl.param") {
            continue;
        }
        let attr_error = |what: &str| (op, format!("hl.param is missing a valid '{what}' attribute"));
        let string_attr = |name: &str| {
            op.attribute(name)
                .ok()
                .and_then(|a| StringAttribute::try_from(a).ok())
                .map(|a| string_value(&a))
                .ok_or_else(|| attr_error(name))
        };
        let path = string_attr("sym_name")?;
        let owner = string_attr("owner")?;
        let ty = op
            .attribute("type")
            .ok()
            .and_then(|a| TypeAttribute::try_from(a).ok())
            .and_then(|t| RankedTensorType::try_from(t.value()).ok())
            .ok_or_else(|| attr_error("type"))?;
        let mut shape = Vec::with_capacity(ty.rank());
        for i in 0..ty.rank() {
            match ty.dim_size(i) {
                Ok(DimSize::Static(d)) => shape.push(d),
                // The verifier rejects dynamic parameter shapes.
                _ => return Err((op, format!("hl.param @{path} has no static size in dimension {i}"))),
            }
        }
        let init = op.attribute("init").map_err(|_| attr_error("init"))?.to_string();
        let init = init.strip_prefix("#hl.init<").and_then(|s| s.strip_suffix('>')).unwrap_or(&init).to_string();
        params.push(ParamInfo { path, owner, shape, dtype: ty.element().to_string(), init });
    }
    Ok(params)
}

/// The text of a string attribute. melior's `StringAttribute::value` builds
/// a slice from the C API's null pointer when the string is empty, which
/// aborts; this reads the empty string safely.
fn string_value(attr: &StringAttribute<'_>) -> String {
    unsafe { crate::ffi::to_string(mlir_sys::mlirStringAttrGetValue(attr.to_raw())) }
}

fn shape_text(shape: &[u64]) -> String {
    if shape.is_empty() {
        return "scalar".to_string();
    }
    shape.iter().map(u64::to_string).collect::<Vec<_>>().join("x")
}

/// A name as a cell: control characters escaped (a newline or a tab in a
/// parameter's name broke its row).
fn printable(s: &str) -> String {
    s.chars().flat_map(|c| if c.is_control() { c.escape_default().collect::<Vec<_>>() } else { vec![c] }).collect()
}

/// The table as printed by the pass.
pub fn render_table(params: &[ParamInfo], group_by_owner: bool) -> String {
    const HEADER: [&str; 7] = ["parameter", "owner", "shape", "dtype", "elements", "bytes", "init"];
    let mut rows: Vec<[String; 7]> = Vec::new();
    let row = |p: &ParamInfo| {
        [
            printable(&p.path),
            if p.owner.is_empty() { "-".to_string() } else { printable(&p.owner) },
            shape_text(&p.shape),
            p.dtype.clone(),
            p.elements().to_string(),
            p.bytes().to_string(),
            p.init.clone(),
        ]
    };
    let mut i = 0;
    while i < params.len() {
        let owner = &params[i].owner;
        let mut j = i;
        while j < params.len() && (!group_by_owner || &params[j].owner == owner) {
            rows.push(row(&params[j]));
            j += 1;
        }
        if group_by_owner {
            let group = &params[i..j];
            let name = if owner.is_empty() { "-".to_string() } else { printable(owner) };
            rows.push([
                format!("  subtotal {name}"),
                String::new(),
                String::new(),
                String::new(),
                group.iter().map(ParamInfo::elements).sum::<u64>().to_string(),
                group.iter().map(ParamInfo::bytes).sum::<u64>().to_string(),
                String::new(),
            ]);
        }
        i = j;
    }
    let mut widths = HEADER.map(str::len);
    for r in &rows {
        for (w, cell) in widths.iter_mut().zip(r) {
            *w = (*w).max(cell.len());
        }
    }
    let mut out = String::new();
    let mut line = |cells: &[&str]| {
        let text: Vec<String> = cells.iter().zip(widths).map(|(c, w)| format!("{c:<w$}")).collect();
        out.push_str(text.join("  ").trim_end());
        out.push('\n');
    };
    line(&HEADER);
    for r in &rows {
        line(&r.each_ref().map(String::as_str));
    }
    let elements: u64 = params.iter().map(ParamInfo::elements).sum();
    let bytes: u64 = params.iter().map(ParamInfo::bytes).sum();
    out.push_str(&format!("total: {} parameters, {elements} elements, {bytes} bytes\n", params.len()));
    out
}
