//! Host-side values shared by every backend: tensors as the caller sees
//! them, aligned byte buffers, element conversion, the parameters'
//! starting values and the check of a call's inputs.

use crate::artifact::{DType, Function, Role, Symbol};
use crate::error::{Result, RuntimeError};
use crate::init::Init;
use std::collections::HashMap;

/// A host tensor: shape, element type and values.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Tensor {
    pub shape: Vec<usize>,
    pub dtype: DType,
    pub values: Vec<f64>,
}

impl Tensor {
    pub fn new(shape: impl Into<Vec<usize>>, dtype: DType, values: Vec<f64>) -> Self {
        Tensor { shape: shape.into(), dtype, values }
    }
    pub fn scalar(value: f64, dtype: DType) -> Self {
        Tensor { shape: vec![], dtype, values: vec![value] }
    }
    /// The elements its shape holds (`None` past `usize`).
    pub fn elements(&self) -> Option<usize> {
        self.shape.iter().try_fold(1usize, |n, &d| n.checked_mul(d))
    }
    /// Whether its values fill its shape, no more and no fewer: a tensor
    /// that does not would be read past its end, or in part.
    pub fn filled(&self) -> bool {
        self.elements() == Some(self.values.len())
    }
}

/// Zeroed memory aligned to 64 bytes, viewed as bytes.
pub struct Bytes {
    words: Vec<[u64; 8]>,
    len: usize,
}

impl Bytes {
    /// `len` zeroed bytes; aborts if the system refuses the memory (use
    /// [`Bytes::try_zeroed`] for sizes that come from a model or a file).
    pub fn zeroed(len: usize) -> Self {
        Bytes { words: vec![[0; 8]; len.div_ceil(64).max(1)], len }
    }

    /// `len` zeroed bytes, or an error naming `what` and the size when the
    /// system refuses them.
    pub fn try_zeroed(len: usize, what: &str) -> Result<Self> {
        let words = try_vec([0u64; 8], len.div_ceil(64).max(1), what)?;
        Ok(Bytes { words, len })
    }
    /// `bytes` copied into aligned memory.
    pub fn from_slice(bytes: &[u8]) -> Self {
        let mut b = Bytes::zeroed(bytes.len());
        b.as_bytes_mut().copy_from_slice(bytes);
        b
    }
    pub fn len(&self) -> usize {
        self.len
    }
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    pub fn as_bytes(&self) -> &[u8] {
        // SAFETY: the words hold at least `len` initialised bytes.
        unsafe { std::slice::from_raw_parts(self.words.as_ptr() as *const u8, self.len) }
    }
    pub fn as_bytes_mut(&mut self) -> &mut [u8] {
        unsafe { std::slice::from_raw_parts_mut(self.words.as_mut_ptr() as *mut u8, self.len) }
    }
    pub(crate) fn ptr(&mut self) -> *mut u8 {
        self.words.as_mut_ptr() as *mut u8
    }
    /// The bytes it holds room for (its length at most).
    pub(crate) fn capacity(&self) -> usize {
        self.words.len() * 64
    }
    /// Its length as `len` bytes of the room it holds: a scratch buffer
    /// shared by calls of several sizes. `len` past the room is refused.
    pub(crate) fn set_len(&mut self, len: usize) -> bool {
        if len > self.capacity() {
            return false;
        }
        self.len = len;
        true
    }
    pub(crate) fn const_ptr(&self) -> *const u8 {
        self.words.as_ptr() as *const u8
    }
}

impl Default for Bytes {
    fn default() -> Self {
        Bytes::zeroed(0)
    }
}

impl Clone for Bytes {
    fn clone(&self) -> Self {
        Bytes { words: self.words.clone(), len: self.len }
    }
}

/// Writes `values` into `out` as `dtype` elements.
///
/// One loop per type (the match outside it), so the conversions
/// vectorise: a train step's input batch is written on every call, and
/// the per-element match took 2.7% of the benchmark transformer block's
/// step (262,144 values).
pub fn write_values(out: &mut [u8], dtype: DType, values: &[f64]) {
    // Callers size `out` from the values' shape: a shortfall is a bug here,
    // not bad input, and must not drop values silently.
    assert!(out.len() >= values.len() * dtype.bytes(), "write_values: {} bytes for {} values", out.len(), values.len());
    fn each<const N: usize>(out: &mut [u8], values: &[f64], f: impl Fn(f64) -> [u8; N]) {
        for (o, &v) in out.chunks_exact_mut(N).zip(values) {
            o.copy_from_slice(&f(v));
        }
    }
    match dtype {
        DType::F32 => each(out, values, |v| (v as f32).to_le_bytes()),
        DType::F64 => each(out, values, f64::to_le_bytes),
        DType::I32 => each(out, values, |v| (v as i32).to_le_bytes()),
        DType::I64 => each(out, values, |v| (v as i64).to_le_bytes()),
        DType::I1 => each(out, values, |v| [(v != 0.0) as u8]),
        DType::U8 => each(out, values, |v| [v as u8]),
        // Rounded to nearest even, as a GPU's conversion does.
        DType::F16 => each(out, values, |v| half::f16::from_f64(v).to_le_bytes()),
        DType::BF16 => each(out, values, |v| half::bf16::from_f64(v).to_le_bytes()),
    }
}

/// Reads `out` as `dtype` elements.
pub fn read_values(bytes: &[u8], dtype: DType) -> Vec<f64> {
    bytes
        .chunks_exact(dtype.bytes())
        .map(|c| match dtype {
            DType::F32 => f32::from_le_bytes(c.try_into().unwrap_or_default()) as f64,
            DType::F64 => f64::from_le_bytes(c.try_into().unwrap_or_default()),
            DType::I32 => i32::from_le_bytes(c.try_into().unwrap_or_default()) as f64,
            DType::I64 => i64::from_le_bytes(c.try_into().unwrap_or_default()) as f64,
            DType::I1 | DType::U8 => c[0] as f64,
            DType::F16 => half::f16::from_le_bytes([c[0], c[1]]).to_f64(),
            DType::BF16 => half::bf16::from_le_bytes([c[0], c[1]]).to_f64(),
        })
        .collect()
}

/// `n` copies of `value`, or an error naming `what` when the system refuses
/// the memory.
pub(crate) fn try_vec<T: Clone>(value: T, n: usize, what: &str) -> Result<Vec<T>> {
    let mut v = Vec::new();
    let bytes = (n as u64).saturating_mul(std::mem::size_of::<T>() as u64);
    v.try_reserve_exact(n).map_err(|_| RuntimeError::Memory { what: what.to_string(), bytes, available: None })?;
    v.resize(n, value);
    Ok(v)
}

/// The memory this machine has free (`MemAvailable` of `/proc/meminfo`),
/// where the system says.
pub fn available_memory() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib.saturating_mul(1024))
}

/// Refuses, before allocating, `bytes` of host memory for `what` that the
/// machine does not have free: an error that names the size instead of an
/// abort or the out-of-memory killer halfway through.
pub fn check_memory(what: &str, bytes: u64) -> Result<()> {
    match available_memory() {
        Some(available) if bytes > available => {
            Err(RuntimeError::Memory { what: what.to_string(), bytes, available: Some(available) })
        }
        _ => Ok(()),
    }
}

/// [`initial_symbols`] as tensors, by name: the state a session of `table`
/// starts from (`weights`: the file holding the values of `init <data>`
/// parameters, if the model has any).
pub fn initial_state(
    table: &[Symbol],
    seed: u64,
    weights: Option<&std::path::Path>,
) -> Result<std::collections::BTreeMap<String, Tensor>> {
    let symbols = initial_symbols(table, seed, weights)?;
    Ok(table
        .iter()
        .map(|s| {
            let values = read_values(symbols[&s.name].as_bytes(), s.dtype);
            (s.name.clone(), Tensor::new(s.shape.clone(), s.dtype, values))
        })
        .collect())
}

/// Every symbol's starting value: parameters drawn from their
/// initializers with `seed` (parameter `i` of the table uses stream `i`),
/// `init <data>` parameters read from `weights` (a safetensors file, f32
/// tensors by parameter name), state zeroed. Every backend starts from the
/// same numbers.
pub(crate) fn initial_symbols(
    table: &[Symbol],
    seed: u64,
    weights: Option<&std::path::Path>,
) -> Result<HashMap<String, Bytes>> {
    let mut data: Option<std::collections::BTreeMap<String, crate::checkpoint::Entry>> = None;
    let mut symbols = HashMap::new();
    let mut stream = 0;
    let elements = |s: &Symbol| s.shape.iter().fold(1u64, |n, &d| n.saturating_mul(d as u64));
    let total = table.iter().fold(0u64, |t, s| t.saturating_add(elements(s).saturating_mul(s.dtype.bytes() as u64)));
    // Tensors, not values: a symbol is a parameter's or a state's tensor.
    let values = table.iter().fold(0u64, |t, s| t.saturating_add(elements(s)));
    check_memory(&format!("the parameters and optimizer state ({} tensors, {values} values)", table.len()), total)?;
    for s in table {
        let n: usize = s.shape.iter().fold(1usize, |n, &d| n.saturating_mul(d));
        let what = format!("@{}", s.name);
        let mut b = Bytes::try_zeroed(n.saturating_mul(s.dtype.bytes()), &what)?;
        if let Some(spec) = &s.init {
            let err = |m: String| RuntimeError::Arguments { function: format!("init of {}", s.name), message: m };
            let init = Init::parse(spec).map_err(|e| err(e.to_string()))?;
            if init == Init::Data {
                let Some(path) = weights else {
                    return Err(err("its value is data (`init <data>`) and the artifact has no weights file".into()));
                };
                if data.is_none() {
                    let (entries, _) = crate::checkpoint::load(path).map_err(|e| err(e.to_string()))?;
                    data = Some(entries);
                }
                let entry = data
                    .as_ref()
                    .and_then(|d| d.get(&s.name))
                    .ok_or_else(|| err(format!("the weights file {} holds no tensor of that name", path.display())))?;
                if entry.shape != s.shape || entry.dtype != DType::F32 {
                    return Err(err(format!(
                        "the weights file {} holds it as {:?} {:?}, the model declares {:?} {:?}",
                        path.display(),
                        entry.dtype,
                        entry.shape,
                        DType::F32,
                        s.shape
                    )));
                }
                let values =
                    entry.bytes.chunks_exact(4).map(|v| f64::from(f32::from_le_bytes([v[0], v[1], v[2], v[3]])));
                write_chunked(b.as_bytes_mut(), s.dtype, values);
                stream += 1;
                symbols.insert(s.name.clone(), b);
                continue;
            }
            let mut values = try_vec(0f32, n, &what)?;
            init.fill(&s.shape, seed, stream, &mut values).map_err(|e| err(e.to_string()))?;
            stream += 1;
            write_chunked(b.as_bytes_mut(), s.dtype, values.iter().map(|&v| f64::from(v)));
        }
        symbols.insert(s.name.clone(), b);
    }
    Ok(symbols)
}

/// Writes `values` into `out` as `dtype` elements, a chunk at a time: a
/// tensor's values whole as f64 were a copy twice its f32 size (an 8192 x
/// 8192 weight's 512 MiB, whose refusal aborted the process). Values past
/// `out`'s room are left out.
fn write_chunked(out: &mut [u8], dtype: DType, values: impl Iterator<Item = f64>) {
    const CHUNK: usize = 1 << 16;
    let mut chunk = Vec::with_capacity(CHUNK);
    let mut slots = out.chunks_mut(CHUNK * dtype.bytes());
    let mut values = values.peekable();
    while values.peek().is_some() {
        let Some(slot) = slots.next() else { return };
        chunk.clear();
        chunk.extend(values.by_ref().take(slot.len() / dtype.bytes()));
        write_values(slot, dtype, &chunk);
    }
}

/// Why `inputs` do not fit `f`'s inputs (count, shape or type), if they do not.
pub(crate) fn input_mismatch(f: &Function, inputs: &[&Tensor]) -> Option<String> {
    let expected: Vec<_> = f.args.iter().filter(|a| a.role() == Role::Input).collect();
    if expected.len() != inputs.len() {
        return Some(format!("{} inputs given, the function takes {}", inputs.len(), expected.len()));
    }
    if let Some((i, (a, t))) =
        expected.iter().zip(inputs).enumerate().find(|(_, (a, t))| t.shape != a.shape || t.dtype != a.dtype)
    {
        return Some(format!(
            "input #{i} ({}) is {:?} {:?}, the model expects {:?} {:?}",
            a.bind, t.dtype, t.shape, a.dtype, a.shape
        ));
    }
    expected.iter().zip(inputs).enumerate().find(|(_, (_, t))| !t.filled()).map(|(i, (a, t))| {
        format!(
            "input #{i} ({}) holds {} values; its shape {:?} takes {}",
            a.bind,
            t.values.len(),
            t.shape,
            t.shape.iter().product::<usize>()
        )
    })
}

/// Integer inputs hold what their element type can: whole numbers in its
/// range. A NaN label, a 2.5 or a 1e12 for an i32 was cast on the way in
/// (to 0, 2 and 2^31 - 1), a silently other input; the error names the
/// input, the value and where it is. A boolean (i1) takes any value but a
/// NaN, which is neither (nonzero is true, as [`write_values`] writes it: a
/// mask of 255s).
///
/// The float inputs of a train step (`@train_step`, `@train_grad`,
/// `@train_apply`: what updates the parameters) hold no NaN, and its
/// learning rate is a finite number of at least 0: a NaN feature or rate
/// ran, returned a normal-looking loss and left every parameter NaN (the
/// `Trainer` checked, a program on the runtime alone did not). Infinities
/// pass (an additive mask holds -inf), and other functions compute on NaN
/// as IEEE says. A finite value past the float type's range is refused by
/// every function: it would arrive as an infinity.
pub(crate) fn check_integer_inputs(f: &Function, inputs: &[&Tensor]) -> std::result::Result<(), String> {
    let expected = f.args.iter().filter(|a| a.role() == Role::Input);
    let trains = f.name.starts_with("train_");
    for (i, (a, t)) in expected.zip(inputs).enumerate() {
        if matches!(a.dtype, DType::F32 | DType::F64 | DType::F16 | DType::BF16) {
            if trains
                && a.bind == "lr"
                && let Some(&v) = t.values.iter().find(|v| !(v.is_finite() && **v >= 0.0))
            {
                return Err(format!(
                    "input #{i} (lr), the learning rate, is {v}: a finite number of at least 0; nothing was run"
                ));
            }
            // A finite value past the element type's range would arrive as
            // an infinity (1e39 in an f32), which then went unnamed: the
            // step ran and the loss's NaN blamed the learning rate. (One
            // pass over the values for both.)
            let most = a.dtype.largest_float().unwrap_or(f64::MAX);
            // Other functions compute on NaN as IEEE says, but a value past
            // the range is no value of the type (`predict` on 1e40 gave NaN,
            // where the step refused it).
            if let Some(at) = t.values.iter().position(|v| (trains && v.is_nan()) || (v.is_finite() && v.abs() > most))
            {
                let v = t.values[at];
                return Err(if v.is_nan() {
                    format!("input #{i} ({}) holds NaN at index {at} (of shape {:?}); nothing was run", a.bind, t.shape)
                } else {
                    format!(
                        "input #{i} ({}) holds {v:e} at index {at} (of shape {:?}), beyond {:?}'s range ({most:e}): \
                         it would be an infinity; nothing was run",
                        a.bind, t.shape, a.dtype
                    )
                });
            }
            continue;
        }
        if a.dtype == DType::I1 {
            if let Some(at) = t.values.iter().position(|v| v.is_nan()) {
                return Err(format!(
                    "input #{i} ({}) holds {} at index {at} (of shape {:?}), which is no boolean (i1: zero is \
                     false, any other value true)",
                    a.bind, t.values[at], t.shape
                ));
            }
            continue;
        }
        let (low, high) = match a.dtype {
            DType::I32 => (i32::MIN as f64, i32::MAX as f64),
            // (2^63 itself is the first f64 past i64's range.)
            DType::I64 => (i64::MIN as f64, -(i64::MIN as f64) - 1024.0),
            DType::U8 => (0.0, 255.0),
            _ => continue,
        };
        if let Some((at, v)) =
            t.values.iter().enumerate().find(|(_, v)| !(v.fract() == 0.0 && (low..=high).contains(*v)))
        {
            let why = if v.is_nan() || (v.is_finite() && v.fract() != 0.0) {
                "not a whole number".to_string()
            } else {
                format!("outside its range [{low}, {high}]")
            };
            return Err(format!(
                "input #{i} ({}) holds {v} at index {at} (of shape {:?}), {why} for its element type {:?}",
                a.bind, t.shape, a.dtype
            ));
        }
    }
    Ok(())
}

/// Integer inputs that kernels use as indices (labels, token ids), checked
/// on the host before anything runs: a bad one is an error naming it, not
/// a wild read.
/// Whether the indices in `bytes` (little-endian integers of the check's
/// dtype) are valid for `check`; the error names the first bad one.
pub(crate) fn check_index_bytes(check: &crate::artifact::IndexCheck, bytes: &[u8]) -> std::result::Result<(), String> {
    let values: Box<dyn Iterator<Item = i64>> = match check.dtype {
        DType::I32 => Box::new(bytes.chunks_exact(4).map(|b| i32::from_le_bytes([b[0], b[1], b[2], b[3]]) as i64)),
        DType::I64 => Box::new(
            bytes.chunks_exact(8).map(|b| i64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]])),
        ),
        _ => return Ok(()),
    };
    for (i, v) in values.enumerate() {
        if (v < 0 || v >= check.bound) && Some(v) != check.allowed {
            return Err(format!("{} {v} at position {i} is outside [0, {})", check.what, check.bound));
        }
    }
    Ok(())
}

pub(crate) fn check_input_indices(f: &Function, inputs: &[&Tensor]) -> std::result::Result<(), String> {
    for c in &f.calls {
        for check in &c.index_checks {
            let Some(crate::artifact::Buffer::Arg { index }) = c.buffers.get(check.operand).copied() else { continue };
            if f.args.get(index).map(|a| a.role()) != Some(Role::Input) {
                continue;
            }
            let position = f.args[..index].iter().filter(|a| a.role() == Role::Input).count();
            let Some(input) = inputs.get(position) else { continue };
            if let Some((i, v)) = input
                .values
                .iter()
                .enumerate()
                .find(|(_, v)| (**v < 0.0 || **v >= check.bound as f64) && Some(**v as i64) != check.allowed)
            {
                return Err(format!("{} {v} at position {i} is outside [0, {})", check.what, check.bound));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Memory the system cannot give is an error that names what it was
    /// for and how much, not an abort.
    #[test]
    fn refused_memory_is_an_error_naming_the_size() {
        let e = Bytes::try_zeroed(usize::MAX / 2, "the arena of @train_step").err().unwrap().to_string();
        assert!(e.starts_with("the arena of @train_step: ") && e.contains(" of memory needed"), "{e}");
        assert!(e.contains("the allocation was refused"), "{e}");
        if let Some(available) = available_memory() {
            let e = check_memory("@fc1.weight", available.saturating_mul(4)).err().unwrap().to_string();
            assert!(e.contains("@fc1.weight: ") && e.contains("this machine has"), "{e}");
        }
        assert!(check_memory("a small buffer", 64).is_ok());
        assert_eq!(Bytes::try_zeroed(100, "x").unwrap().len(), 100);
    }

    /// A symbol table of 2^40 parameters is refused before anything is
    /// allocated or initialised.
    #[test]
    fn huge_symbol_tables_are_refused_up_front() {
        let table = vec![Symbol {
            name: "fc1.weight".into(),
            kind: "param".into(),
            shape: vec![1 << 20, 1 << 20],
            dtype: DType::F32,
            init: Some("zeros".into()),
        }];
        let e = initial_symbols(&table, 0, None).err().unwrap().to_string();
        assert!(e.contains(": 4.0 TiB of memory needed"), "{e}");
    }
}
