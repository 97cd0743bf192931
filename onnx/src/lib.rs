//! ONNX model files: the protobuf messages, loading a model with its
//! external data, and tensors read into plain values.
//!
//! The message types are generated at build time from `proto/onnx.proto`
//! (the file the `onnx` Python package ships) by prost, with protox as the
//! protobuf compiler, so no system `protoc` is needed. The translation to
//! AICF's `hl` dialect lives in `aicf_compiler::import::onnx`; this crate
//! knows nothing of MLIR and its tests run without it.

use std::path::{Path, PathBuf};

pub mod proto {
    #![allow(clippy::all)]
    include!(concat!(env!("OUT_DIR"), "/onnx.rs"));
}

use prost::Message;
use proto::tensor_proto::DataType;

/// The largest model file read (2 GiB, protobuf's own limit for one message).
pub const MAX_MODEL_BYTES: u64 = 2 << 30;
/// The largest tensor materialised (elements).
pub const MAX_ELEMENTS: usize = 1 << 31;

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum OnnxError {
    #[error("{path}: {message}")]
    Io { path: PathBuf, message: String },
    #[error("{path}: not an ONNX model: {message}")]
    Decode { path: PathBuf, message: String },
    #[error("tensor '{name}': {message}")]
    Tensor { name: String, message: String },
}

/// Reads and decodes an ONNX model file.
pub fn load(path: &Path) -> Result<proto::ModelProto, OnnxError> {
    let io = |e: std::io::Error| OnnxError::Io { path: path.to_path_buf(), message: e.to_string() };
    let meta = std::fs::metadata(path).map_err(io)?;
    if meta.is_dir() {
        let message = if path.join("saved_model.pb").is_file() {
            "a TensorFlow SavedModel directory, not an ONNX model: convert it first (`python -m tf2onnx.convert \
             --saved-model DIR --output model.onnx`)"
        } else {
            "a directory, not an ONNX model file"
        };
        return Err(OnnxError::Io { path: path.to_path_buf(), message: message.into() });
    }
    let size = meta.len();
    if size > MAX_MODEL_BYTES {
        return Err(OnnxError::Io {
            path: path.to_path_buf(),
            message: format!("{size} bytes, more than the {MAX_MODEL_BYTES} a protobuf message can hold"),
        });
    }
    let bytes = std::fs::read(path).map_err(io)?;
    decode(&bytes).map_err(|message| {
        let message = match other_format(&bytes, path) {
            Some(what) => format!("{message}; it is {what}"),
            None => message,
        };
        OnnxError::Decode { path: path.to_path_buf(), message }
    })
}

/// What a file that is no ONNX model looks like it is, by its first bytes
/// (and name), with the way to an ONNX model from it.
fn other_format(bytes: &[u8], path: &Path) -> Option<&'static str> {
    let name = path.file_name().map(|n| n.to_string_lossy().to_lowercase()).unwrap_or_default();
    if bytes.starts_with(b"PK\x03\x04") {
        Some(if name.ends_with(".keras") {
            "a Keras model archive: export it to ONNX first (Keras 3's `model.export(path, format=\"onnx\")`, or \
             tf2onnx)"
        } else {
            "a zip archive (a Keras .keras file, or a PyTorch torch.save file): export the model to ONNX first \
             (Keras: `model.export(path, format=\"onnx\")`; PyTorch: `torch.onnx.export`)"
        })
    } else if bytes.starts_with(b"\x89HDF") {
        Some("an HDF5 file (a Keras .h5 model): export the model to ONNX first (tf2onnx, or Keras 3's `model.export`)")
    } else if bytes.first() == Some(&0x80) && bytes.get(1).is_some_and(|v| (2..=5).contains(v)) {
        Some("a Python pickle (a PyTorch .pt file): export the model with `torch.onnx.export` first")
    } else if bytes.len() > 9 && bytes[8] == b'{' && {
        // (safetensors: the header's length, then the header's JSON.)
        let n = u64::from_le_bytes(bytes[..8].try_into().unwrap_or([0; 8]));
        n > 0 && n < bytes.len() as u64
    } {
        Some("a safetensors file of weights, not a model: give the .onnx model")
    } else if name == "saved_model.pb" {
        Some(
            "a TensorFlow SavedModel's graph: convert its directory first (`python -m tf2onnx.convert --saved-model DIR --output model.onnx`)",
        )
    } else {
        None
    }
}

/// Decodes a model from its bytes; a model without a graph is an error.
pub fn decode(bytes: &[u8]) -> Result<proto::ModelProto, String> {
    let model = proto::ModelProto::decode(bytes).map_err(|e| e.to_string())?;
    if model.graph.is_none() {
        return Err("the model has no graph".into());
    }
    Ok(model)
}

/// A tensor's elements, widened to the types AICF computes in: floating
/// point to `f32` (f64 rounds), integers and booleans to `i64`.
#[derive(Debug, Clone, PartialEq)]
pub enum Data {
    F32(Vec<f32>),
    I64(Vec<i64>),
}

impl Data {
    pub fn len(&self) -> usize {
        match self {
            Data::F32(v) => v.len(),
            Data::I64(v) => v.len(),
        }
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// The elements as `f64` (exact for every `f32` and for integers below 2^53).
    pub fn to_f64(&self) -> Vec<f64> {
        match self {
            Data::F32(v) => v.iter().map(|&x| x as f64).collect(),
            Data::I64(v) => v.iter().map(|&x| x as f64).collect(),
        }
    }
    /// The elements as `i64` (floats truncate toward zero).
    pub fn to_i64(&self) -> Vec<i64> {
        match self {
            Data::F32(v) => v.iter().map(|&x| x as i64).collect(),
            Data::I64(v) => v.clone(),
        }
    }
}

/// A tensor read from the file: its name, dimensions, element type as the
/// file declared it, and values.
#[derive(Debug, Clone, PartialEq)]
pub struct Tensor {
    pub name: String,
    pub dims: Vec<usize>,
    pub data_type: DataType,
    pub data: Data,
}

impl Tensor {
    pub fn elements(&self) -> usize {
        self.dims.iter().product()
    }
    pub fn is_float(&self) -> bool {
        matches!(self.data, Data::F32(_))
    }
}

/// The name ONNX gives an element type (`FLOAT`, `INT64`, ...).
pub fn type_name(t: i32) -> String {
    DataType::try_from(t).map(|d| d.as_str_name().to_string()).unwrap_or_else(|_| format!("data type {t}"))
}

/// Reads `t`'s values: from `raw_data` (little-endian), from the typed
/// fields, or from external data (a file relative to `base`, the model's
/// directory, which the location may not leave).
pub fn tensor(t: &proto::TensorProto, base: &Path) -> Result<Tensor, OnnxError> {
    let fail = |message: String| OnnxError::Tensor { name: t.name().to_string(), message };
    let mut dims = Vec::with_capacity(t.dims.len());
    for &d in &t.dims {
        if d < 0 {
            return Err(fail(format!("negative dimension {d} in {:?}", t.dims)));
        }
        dims.push(d as usize);
    }
    let n = dims
        .iter()
        .try_fold(1usize, |n, &d| n.checked_mul(d))
        .filter(|&n| n <= MAX_ELEMENTS)
        .ok_or_else(|| fail(format!("{:?} has more than {MAX_ELEMENTS} elements", t.dims)))?;
    let data_type =
        DataType::try_from(t.data_type()).map_err(|_| fail(format!("unknown data type {}", t.data_type())))?;
    let external;
    let raw: Option<&[u8]> = if t.data_location() == proto::tensor_proto::DataLocation::External {
        external = read_external(t, base, n, data_type).map_err(fail)?;
        Some(&external)
    } else if !t.raw_data().is_empty() || n == 0 {
        Some(t.raw_data())
    } else {
        None
    };
    let width = element_bytes(data_type)
        .ok_or_else(|| fail(format!("element type {} is not supported", data_type.as_str_name())))?;
    let data = match raw {
        Some(bytes) => {
            if bytes.len() != n * width {
                return Err(fail(format!(
                    "{} bytes of data for {n} elements of {} ({} expected)",
                    bytes.len(),
                    data_type.as_str_name(),
                    n * width
                )));
            }
            from_raw(bytes, data_type)
        }
        None => from_fields(t, data_type),
    };
    let data = data.ok_or_else(|| fail(format!("element type {} is not supported", data_type.as_str_name())))?;
    if data.len() != n {
        return Err(fail(format!("{} values for shape {:?} ({n} elements)", data.len(), t.dims)));
    }
    Ok(Tensor { name: t.name().to_string(), dims, data_type, data })
}

fn element_bytes(d: DataType) -> Option<usize> {
    Some(match d {
        DataType::Float | DataType::Int32 | DataType::Uint32 => 4,
        DataType::Double | DataType::Int64 | DataType::Uint64 => 8,
        DataType::Float16 | DataType::Bfloat16 | DataType::Int16 | DataType::Uint16 => 2,
        DataType::Int8 | DataType::Uint8 | DataType::Bool => 1,
        _ => return None,
    })
}

fn chunks<const N: usize>(bytes: &[u8]) -> impl Iterator<Item = [u8; N]> + '_ {
    bytes.chunks_exact(N).map(|c| {
        let mut a = [0u8; N];
        a.copy_from_slice(c);
        a
    })
}

fn from_raw(b: &[u8], d: DataType) -> Option<Data> {
    Some(match d {
        DataType::Float => Data::F32(chunks::<4>(b).map(f32::from_le_bytes).collect()),
        DataType::Double => Data::F32(chunks::<8>(b).map(|c| f64::from_le_bytes(c) as f32).collect()),
        DataType::Float16 => Data::F32(chunks::<2>(b).map(|c| f16_to_f32(u16::from_le_bytes(c))).collect()),
        DataType::Bfloat16 => {
            Data::F32(chunks::<2>(b).map(|c| f32::from_bits((u16::from_le_bytes(c) as u32) << 16)).collect())
        }
        DataType::Int64 => Data::I64(chunks::<8>(b).map(i64::from_le_bytes).collect()),
        DataType::Uint64 => Data::I64(chunks::<8>(b).map(|c| u64::from_le_bytes(c) as i64).collect()),
        DataType::Int32 => Data::I64(chunks::<4>(b).map(|c| i32::from_le_bytes(c) as i64).collect()),
        DataType::Uint32 => Data::I64(chunks::<4>(b).map(|c| u32::from_le_bytes(c) as i64).collect()),
        DataType::Int16 => Data::I64(chunks::<2>(b).map(|c| i16::from_le_bytes(c) as i64).collect()),
        DataType::Uint16 => Data::I64(chunks::<2>(b).map(|c| u16::from_le_bytes(c) as i64).collect()),
        DataType::Int8 => Data::I64(b.iter().map(|&x| x as i8 as i64).collect()),
        DataType::Uint8 | DataType::Bool => Data::I64(b.iter().map(|&x| x as i64).collect()),
        _ => return None,
    })
}

/// The typed fields, as onnx.proto assigns them: float_data (FLOAT),
/// double_data (DOUBLE), int64_data (INT64), uint64_data (UINT32/64), and
/// int32_data for every narrower type (FLOAT16 and BFLOAT16 as their bits).
fn from_fields(t: &proto::TensorProto, d: DataType) -> Option<Data> {
    Some(match d {
        DataType::Float => Data::F32(t.float_data.clone()),
        DataType::Double => Data::F32(t.double_data.iter().map(|&x| x as f32).collect()),
        DataType::Float16 => Data::F32(t.int32_data.iter().map(|&x| f16_to_f32(x as u16)).collect()),
        DataType::Bfloat16 => {
            Data::F32(t.int32_data.iter().map(|&x| f32::from_bits((x as u32 & 0xffff) << 16)).collect())
        }
        DataType::Int64 => Data::I64(t.int64_data.clone()),
        DataType::Uint32 | DataType::Uint64 => Data::I64(t.uint64_data.iter().map(|&x| x as i64).collect()),
        DataType::Int32 | DataType::Int16 | DataType::Int8 | DataType::Uint16 | DataType::Uint8 | DataType::Bool => {
            Data::I64(t.int32_data.iter().map(|&x| x as i64).collect())
        }
        _ => return None,
    })
}

fn f16_to_f32(h: u16) -> f32 {
    let sign = ((h >> 15) as u32) << 31;
    let exp = ((h >> 10) & 0x1f) as i32;
    let frac = (h & 0x3ff) as u32;
    let bits = match exp {
        0 if frac == 0 => sign,
        // Subnormal: value = frac * 2^-24.
        0 => return f32::from_bits(sign) + (if sign != 0 { -1.0 } else { 1.0 }) * frac as f32 * (2f32).powi(-24),
        31 => sign | 0x7f80_0000 | (frac << 13),
        _ => sign | (((exp - 15 + 127) as u32) << 23) | (frac << 13),
    };
    f32::from_bits(bits)
}

/// The bytes of an external tensor: `location` (relative to `base`, not
/// leaving it), `offset` and `length` from `external_data`.
fn read_external(t: &proto::TensorProto, base: &Path, n: usize, d: DataType) -> Result<Vec<u8>, String> {
    let mut location = None;
    let (mut offset, mut length) = (0u64, None);
    for e in &t.external_data {
        let number = || {
            e.value().parse::<u64>().map_err(|_| format!("external data {} is not a number: '{}'", e.key(), e.value()))
        };
        match e.key() {
            "location" => location = Some(e.value().to_string()),
            "offset" => offset = number()?,
            "length" => length = Some(number()?),
            _ => {}
        }
    }
    let location = location.ok_or("external data without a location")?;
    let rel = Path::new(&location);
    if rel.is_absolute() || rel.components().any(|c| matches!(c, std::path::Component::ParentDir)) {
        return Err(format!("external data location '{location}' leaves the model's directory"));
    }
    let path = base.join(rel);
    let width = element_bytes(d).ok_or_else(|| format!("element type {} is not supported", d.as_str_name()))?;
    let want = length.unwrap_or((n * width) as u64);
    // Checked before opening: opening a pipe would wait for a writer, and a
    // symbolic link may lead out of the model's directory.
    let meta = std::fs::metadata(&path).map_err(|e| format!("external data {}: {e}", path.display()))?;
    if !meta.is_file() {
        let what = if meta.is_dir() { "a directory" } else { "not a regular file (a device, pipe or socket)" };
        return Err(format!("external data {}: {what}; a tensor's data is read from a file", path.display()));
    }
    let dir = if base.as_os_str().is_empty() { Path::new(".") } else { base };
    let real = path.canonicalize().map_err(|e| format!("external data {}: {e}", path.display()))?;
    let dir = dir.canonicalize().map_err(|e| format!("the model's directory {}: {e}", dir.display()))?;
    if !real.starts_with(&dir) {
        return Err(format!(
            "external data location '{location}' leaves the model's directory (through a symbolic link)"
        ));
    }
    use std::io::{Read, Seek, SeekFrom};
    let mut f = std::fs::File::open(&path).map_err(|e| format!("external data {}: {e}", path.display()))?;
    let size = f.metadata().map_err(|e| format!("external data {}: {e}", path.display()))?.len();
    if offset.checked_add(want).is_none_or(|end| end > size) {
        return Err(format!(
            "external data {} holds {size} bytes, the tensor needs {want} at offset {offset}",
            path.display()
        ));
    }
    f.seek(SeekFrom::Start(offset)).map_err(|e| format!("external data {}: {e}", path.display()))?;
    let mut bytes = vec![0u8; want as usize];
    f.read_exact(&mut bytes).map_err(|e| format!("external data {}: {e}", path.display()))?;
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn float_tensor(name: &str, dims: &[i64], values: &[f32]) -> proto::TensorProto {
        proto::TensorProto {
            name: Some(name.into()),
            dims: dims.to_vec(),
            data_type: Some(DataType::Float as i32),
            raw_data: Some(values.iter().flat_map(|v| v.to_le_bytes()).collect()),
            ..Default::default()
        }
    }

    /// A file of another framework given for an ONNX model is named as
    /// what it is, with the way to an ONNX model (a Keras archive said
    /// "invalid tag value: 0"; a SavedModel directory "Is a directory").
    #[test]
    fn other_frameworks_files_are_named_with_the_way_to_onnx() {
        let dir = std::env::temp_dir().join(format!("aicf-onnx-formats-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("saved")).unwrap();
        std::fs::write(dir.join("saved").join("saved_model.pb"), b"\x08\x01").unwrap();
        let said = |name: &str, bytes: &[u8]| {
            std::fs::write(dir.join(name), bytes).unwrap();
            load(&dir.join(name)).unwrap_err().to_string()
        };
        assert!(said("m.keras", b"PK\x03\x04\x14\x00\x00\x00").contains("a Keras model archive"));
        assert!(said("m.pt", b"PK\x03\x04\x14\x00\x00\x00").contains("torch.onnx.export"));
        assert!(said("m.h5", b"\x89HDF\r\n\x1a\n\x00\x00").contains("an HDF5 file"));
        assert!(said("old.pt", b"\x80\x02\x8a\x0alZ\xfc\x9cF\xf9 j\xa8").contains("a Python pickle"));
        let mut st = 2u64.to_le_bytes().to_vec();
        st.extend_from_slice(b"{}");
        assert!(said("w.safetensors", &st).contains("a safetensors file of weights"));
        let e = load(&dir.join("saved")).unwrap_err().to_string();
        assert!(e.contains("a TensorFlow SavedModel directory") && e.contains("tf2onnx"), "{e}");
        std::fs::create_dir_all(dir.join("empty")).unwrap();
        assert!(load(&dir.join("empty")).unwrap_err().to_string().contains("a directory, not an ONNX model file"));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn raw_and_typed_fields_read_the_same_values() {
        let raw = float_tensor("w", &[2, 2], &[1.0, -2.0, 0.5, 3.0]);
        let typed = proto::TensorProto {
            name: Some("w".into()),
            dims: vec![2, 2],
            data_type: Some(DataType::Float as i32),
            float_data: vec![1.0, -2.0, 0.5, 3.0],
            ..Default::default()
        };
        let a = tensor(&raw, Path::new(".")).unwrap();
        let b = tensor(&typed, Path::new(".")).unwrap();
        assert_eq!(a, b);
        assert_eq!(a.dims, vec![2, 2]);
        let ints = proto::TensorProto {
            name: Some("shape".into()),
            dims: vec![3],
            data_type: Some(DataType::Int64 as i32),
            int64_data: vec![1, -1, 4],
            ..Default::default()
        };
        assert_eq!(tensor(&ints, Path::new(".")).unwrap().data, Data::I64(vec![1, -1, 4]));
        let half = proto::TensorProto {
            name: Some("h".into()),
            dims: vec![3],
            data_type: Some(DataType::Float16 as i32),
            int32_data: vec![0x3c00, 0xc000, 0x0001],
            ..Default::default()
        };
        assert_eq!(tensor(&half, Path::new(".")).unwrap().data, Data::F32(vec![1.0, -2.0, 2f32.powi(-24)]));
    }

    #[test]
    fn bad_tensors_are_errors_naming_the_tensor() {
        let short = float_tensor("fc.weight", &[2, 3], &[1.0, 2.0]);
        let e = tensor(&short, Path::new(".")).unwrap_err().to_string();
        assert!(e.contains("fc.weight") && e.contains("8 bytes") && e.contains("24 expected"), "{e}");
        let negative = float_tensor("x", &[-1, 2], &[]);
        assert!(tensor(&negative, Path::new(".")).unwrap_err().to_string().contains("negative dimension"));
        let huge = float_tensor("big", &[1 << 40, 1 << 40], &[]);
        assert!(tensor(&huge, Path::new(".")).unwrap_err().to_string().contains("more than"));
        let mut strings = float_tensor("s", &[1], &[]);
        strings.data_type = Some(DataType::String as i32);
        assert!(tensor(&strings, Path::new(".")).unwrap_err().to_string().contains("STRING is not supported"));
    }

    #[test]
    fn external_data_is_read_relative_to_the_model_and_may_not_leave_it() {
        let dir = std::env::temp_dir().join(format!("aicf-onnx-ext-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let values: Vec<u8> = [7.0f32, 8.0, 9.0].iter().flat_map(|v| v.to_le_bytes()).collect();
        std::fs::write(dir.join("w.bin"), [vec![0u8; 4], values].concat()).unwrap();
        let entry = |k: &str, v: &str| proto::StringStringEntryProto { key: Some(k.into()), value: Some(v.into()) };
        let mut t = proto::TensorProto {
            name: Some("w".into()),
            dims: vec![3],
            data_type: Some(DataType::Float as i32),
            data_location: Some(proto::tensor_proto::DataLocation::External as i32),
            external_data: vec![entry("location", "w.bin"), entry("offset", "4"), entry("length", "12")],
            ..Default::default()
        };
        assert_eq!(tensor(&t, &dir).unwrap().data, Data::F32(vec![7.0, 8.0, 9.0]));
        t.external_data[1] = entry("offset", "8");
        let e = tensor(&t, &dir).unwrap_err().to_string();
        assert!(e.contains("holds 16 bytes") && e.contains("offset 8"), "{e}");
        t.external_data[0] = entry("location", "../w.bin");
        assert!(tensor(&t, &dir).unwrap_err().to_string().contains("leaves the model's directory"));
        // A symbolic link inside the directory that leads out of it.
        let outside = std::env::temp_dir().join(format!("aicf-onnx-ext-out-{}.bin", std::process::id()));
        std::fs::write(&outside, vec![0u8; 64]).unwrap();
        std::os::unix::fs::symlink(&outside, dir.join("link.bin")).unwrap();
        t.external_data = vec![entry("location", "link.bin")];
        let e = tensor(&t, &dir).unwrap_err().to_string();
        assert!(e.contains("leaves the model's directory (through a symbolic link)"), "{e}");
        // A pipe is refused before it is opened (opening would wait for a writer).
        let fifo = dir.join("pipe.bin");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status().map(|s| s.success()).unwrap_or(false);
        assert!(made, "mkfifo {}", fifo.display());
        t.external_data = vec![entry("location", "pipe.bin")];
        let e = tensor(&t, &dir).unwrap_err().to_string();
        assert!(e.contains("not a regular file"), "{e}");
        std::fs::remove_file(&outside).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_file_that_is_not_a_model_is_an_error_naming_it() {
        let dir = std::env::temp_dir().join(format!("aicf-onnx-bad-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("junk.onnx");
        std::fs::write(&path, b"\xff\xff\xff\xff not protobuf").unwrap();
        let e = load(&path).unwrap_err().to_string();
        assert!(e.contains("junk.onnx") && e.contains("not an ONNX model"), "{e}");
        assert!(load(&dir.join("missing.onnx")).unwrap_err().to_string().contains("missing.onnx"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
