//! What the code generator's files share: the IR readers, the artifact
//! types, the kernel builder, and the generator's own items.

pub(crate) use super::emit::{
    Kernel, cast_float, compute, flat_type, lines, narrow_element, numel, row_major_strides, simd_lanes,
};
pub(crate) use super::ops::attention::AttentionShape;
pub(crate) use super::ops::flash::AttentionTile;
pub(crate) use super::ops::gemm::mma::{TensorCoreTile, async_chunk, tensor_core_epilogue, tile_chunks};
pub(crate) use super::ops::gemm::wgmma::{WGMMA_BK, WGMMA_STAGES};
pub(crate) use super::ops::gemm::{Epilogue, GemmLayout, Tile};
pub(crate) use super::ops::reduce::ColumnReduce;
pub(crate) use super::target::cpu::KernelCache;
pub(crate) use super::target::gpu::{GpuOptions, gpu_func_text};
pub(crate) use super::target::{Target, TargetInfo, Team};
pub(crate) use super::{
    Generator, KernelStats, Kernels, Result, at, compile, internal, io_error, runtime_dtype, thread_tag,
    unsupported_at, write_atomically,
};
pub(crate) use crate::context::CompilerContext;
pub(crate) use crate::error::CompileError;
pub(crate) use crate::ir::{self, attr, float_attr, has, i64_array, int_attr, op_name, operands, ops_of};
pub(crate) use crate::types::DType;
pub(crate) use aicf_runtime::artifact::{
    self, Arg, Buffer, Call, Constant, Function, IndexCheck, Launch, LibraryGemm, Manifest, Symbol,
};
pub(crate) use aicf_runtime::init::Float;
pub(crate) use melior::ir::Module;
pub(crate) use mlir_sys::*;
pub(crate) use std::collections::{BTreeMap, HashMap};
pub(crate) use std::fmt::Write as _;
pub(crate) use std::path::{Path, PathBuf};
