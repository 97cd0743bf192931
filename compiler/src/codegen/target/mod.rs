//! What code generation targets, as a value: [`Target`] is what a caller
//! picks (the host CPU with its kernel cache, or NVIDIA GPUs with their
//! options); [`TargetInfo`] is how that target shapes the kernels the op
//! families write (Triton's `TargetInfoBase`): how a row kernel or an
//! elementwise kernel maps onto threads, how the threads of a whole-op
//! reduction combine, which form of a family (GEMM, attention, a norm's
//! gradient) it runs, and how the kernels become an artifact. The op
//! generators (`ops/`) call these hooks and never ask which target it is.
//!
//! `cpu.rs`: kernels.so from a content-addressed kernel cache. `gpu.rs`:
//! PTX for sm_80 and sm_90a, launch shapes in the manifest.

pub mod cpu;
pub mod gpu;

use crate::codegen::prelude::*;

/// What code is generated for.
#[derive(Clone, Debug)]
pub enum Target {
    /// The host CPU: `kernels.so`, built from kernels held in the cache.
    Cpu(KernelCache),
    /// NVIDIA GPUs: PTX for sm_80 and sm_90.
    Cuda(GpuOptions),
}

impl Target {
    /// Whether the options make sense (GEMM and attention tilings the GPU
    /// can run).
    pub(crate) fn check(&self) -> Result<()> {
        match self {
            Target::Cuda(options) => {
                if let Some(tile) = options.gemm_tile {
                    tile.check().map_err(|e| CompileError::Unsupported(format!("the GEMM tile option: {e}")))?;
                }
                if let Some(tile) = options.attention_tile {
                    tile.check().map_err(|e| CompileError::Unsupported(format!("the attention tile option: {e}")))?;
                }
                Ok(())
            }
            _ => Ok(()),
        }
    }

    /// The hooks of this target.
    pub(crate) fn info(&self) -> std::rc::Rc<dyn TargetInfo> {
        match self {
            Target::Cpu(cache) => std::rc::Rc::new(cpu::CpuTarget { cache: cache.clone() }),
            Target::Cuda(options) => std::rc::Rc::new(gpu::GpuTarget { options: *options }),
        }
    }
}

/// The threads of a kernel that reduces a whole op (a loss over every
/// row): the id of this thread, the stride its loop over rows takes, and
/// the warp id and warp count when a warp takes a row.
pub(crate) struct Team {
    pub(crate) tid: String,
    pub(crate) step: String,
    pub(crate) warp: String,
    pub(crate) warps: String,
}

/// How a target shapes kernels.
pub(crate) trait TargetInfo {
    /// The host features the code needs (the CPU's; none for PTX).
    fn cpu_features(&self) -> Vec<String> {
        Vec::new()
    }

    /// A kernel over rows (softmax, norms, losses): the GPU gives each row
    /// a warp (columns over its lanes, row reductions by shuffles), the CPU
    /// a thread.
    fn row_kernel(&self) -> Kernel;

    /// Opens an elementwise kernel's loop over its work items: returns the
    /// row an item is in and, where an item is one element, the element.
    fn elementwise_item(&self, k: &mut Kernel, cols: usize) -> (String, Option<String>);

    /// The threads of a whole-op reduction kernel.
    fn team(&self, k: &mut Kernel) -> Team;

    /// `part` summed over the team's threads.
    fn team_sum(&self, k: &mut Kernel, team: &Team, part: &str, t: DType) -> String;

    /// The team's total of `warp_total` (each warp's, held by every lane).
    fn team_total(&self, k: &mut Kernel, team: &Team, warp_total: &str, t: DType) -> String;

    /// Stores `value` into buffer `out` once for the team and finishes the
    /// kernel (one work item: the whole op); returns its name.
    fn finish_team(
        &self,
        g: &mut Generator,
        k: Kernel,
        team: &Team,
        value: &str,
        out: usize,
        specs: &[(Vec<usize>, DType)],
    ) -> String;

    /// A form of its own for a reduction over leading dims (`ops/reduce.rs`),
    /// or `None` where the generic form (a work item per output) serves.
    fn reduce_columns(&self, _g: &mut Generator, _r: ColumnReduce, _specs: &[(Vec<usize>, DType)]) -> Option<Kernels> {
        None
    }

    /// The split form of a sum or mean of all `n` elements, into the
    /// `partials` buffer `p` then its slices in order (`ops/reduce.rs`), or
    /// `None` where one team serves.
    fn reduce_whole_split(
        &self,
        _g: &mut Generator,
        _n: usize,
        _mean: bool,
        _p: usize,
        _specs: &[(Vec<usize>, DType)],
    ) -> Option<Kernels> {
        None
    }

    /// A form of its own for a transpose (`ops/data.rs`: an output row a
    /// work item, read at the input's stride of its innermost dim); `None`
    /// where the generic form (an item per element) serves.
    fn transpose_rows(&self, _g: &mut Generator, _perm: &[usize], _specs: &[(Vec<usize>, DType)]) -> Option<Kernels> {
        None
    }

    /// Whether slices, their gradients and concatenations copy a run of the
    /// innermost dim per work item (the CPU: vectorised copies, no index
    /// arithmetic per element; a slice of the transformer's fused QKV
    /// projection took 1.4 ms for 1 MiB an item per element) rather than an
    /// item per element (the GPU: neighbouring threads, neighbouring
    /// elements).
    fn row_copies(&self) -> bool {
        false
    }

    /// Whether a kernel's large scratch rows come from the heap (the CPU,
    /// where a worker thread's stack is small) rather than the stack (the
    /// GPU: a thread's local memory; `Kernel::scratch`).
    fn heap_scratch(&self) -> bool {
        false
    }

    /// Whether an elementwise kernel whose rows stay short after merging
    /// takes further dims into its rows, the inputs broadcast along some of
    /// them indexed by their coordinates (`ops/elementwise.rs`,
    /// `rows_of`): the CPU, whose inner loop over a row of 4 (a batch norm
    /// over 2 x 2 images) ran scalar code, 5x slower than vectorised;
    /// not the GPU, whose work items are elements.
    fn long_rows(&self) -> bool {
        false
    }

    /// Whether kernels whose buffers are apart take them `noalias`
    /// (`Generator::finish_noalias`): the CPU, whose elementwise loops over
    /// many buffers ran scalar for want of it. The GPU's PTX stays as
    /// checked on a device.
    fn noalias(&self) -> bool {
        false
    }

    /// Whether a depthwise convolution and its input gradient take one
    /// image row a work item, the taps' loops over the row (`ops/conv.rs`,
    /// `depthwise_rows`): the CPU, whose element form ran scalar.
    fn conv_rows(&self) -> bool {
        false
    }

    /// Whether a reduction over inner dims runs its reduced dims as nested
    /// loops over merged runs (`ops/reduce.rs`): the CPU, whose one loop
    /// over unravelled indices did not vectorise; the GPU keeps a thread an
    /// output over one loop, as checked on a device.
    fn reduce_runs(&self) -> bool {
        false
    }

    /// Whether max pooling's f32 gradient takes one image plane a work item
    /// (the CPU: each window's maximum found once and its gradient added
    /// there, where an item per input element searched each of the up to
    /// four 3 x 3 stride-2 windows holding it: 7.6 of resnet18's 42 ms a
    /// step) rather than an item per input element (the GPU: every thread
    /// busy, no two writing one element).
    fn pool_planes(&self) -> bool {
        false
    }

    /// Whether `ll.scatter_add` adds into an f32 table atomically, an item
    /// per gradient element (the GPU), rather than an item per table
    /// column reading every index in order (the CPU: the same bits on
    /// every run).
    fn atomic_scatter(&self) -> bool {
        false
    }

    /// The form of `ll.gemm` (`ops/gemm/`).
    fn gemm(&self, g: &mut Generator, op: MlirOperation, specs: &[(Vec<usize>, DType)]) -> Result<Kernels>;

    /// The form of fused attention (`ops/attention.rs`).
    fn attention(&self, g: &mut Generator, a: &AttentionShape, specs: &[(Vec<usize>, DType)]) -> Kernels;

    /// The form of `ll.attention_backward` (`ops/attention_backward.rs`):
    /// the three row kernels, unless the target has its own.
    fn attention_backward(&self, g: &mut Generator, a: &AttentionShape, specs: &[(Vec<usize>, DType)]) -> Kernels {
        g.attention_backward_rows(a, specs)
    }

    /// The form of `ll.norm_backward` (`ops/norm.rs`): how every row's
    /// contribution to the shared weight and bias gradients is added.
    fn norm_backward(&self, g: &mut Generator, op: MlirOperation, specs: &[(Vec<usize>, DType)]) -> Kernels;

    /// Builds the artifact in `out_dir` from the generated kernels; sets
    /// each call's kernel symbol and launch as the target names them.
    /// Returns the manifest's target description, the build's stats and
    /// the PTX modules per chip (GPU).
    fn build(
        &self,
        g: &Generator,
        ctx: &CompilerContext,
        out_dir: &Path,
        functions: &mut [Function],
    ) -> Result<(String, KernelStats, BTreeMap<String, Vec<String>>)>;
}
