//! GEMMs of the runtime's own, on packed operands, one per [`Kernel`]: the
//! registry's `avx512` candidate for f32 operands (AVX-512's
//! `vfmadd231ps`), its `bf16-dot` candidate for bf16 ones, which multiplies
//! the 16-bit operands as they are with AVX-512 BF16's dot product
//! (`vdpbf16ps`: Intel Cooper Lake and Sapphire Rapids on, AMD Zen 4 on),
//! where the other candidates multiply f32 copies (half the bytes read, and
//! two multiply-adds per f32 lane where an FMA does one), and its `avx2`
//! candidate for f32 operands on CPUs without AVX-512 (AVX2 and FMA on ymm
//! registers; also where the host code is held to x86-64-v3). All write an
//! f32 product; a bf16 GEMM's generated epilogue rounds it into the output,
//! as for the widened candidates. Each pair of bf16 products is exact in
//! f32 and added with f32 rounding.
//!
//! The algorithm, BLIS's loop nest, the same for every kernel but for its
//! tile (`MR x NR`: 12 x 32 for AVX-512's, 6 x 16 for AVX2's; see
//! [`Micro`]):
//! 1. Pack B into panels of `NR` columns, and A into panels of `MR` rows,
//!    as 32-bit words along `k`: one f32 per word, or for bf16 the pair of
//!    consecutive `k` that `vdpbf16ps` multiplies in one lane,
//!    `(X[2p], X[2p+1])`. B's panel holds, per word of depth, its `NR`
//!    columns' words (two vector registers); A's words are broadcast to
//!    every lane. An odd `k` ends with a zero half, and the last panels with
//!    zero rows or columns, so the micro-kernel never branches on edges. A
//!    whose rows are contiguous already has its words in place and is read
//!    where it lies (but for its last, partial, panel; see
//!    [`reads_a_directly`]).
//! 2. Split the work over the pool's threads: a batch of products whose
//!    count covers the threads, a product each (each thread packs its own);
//!    one product, by rows or by columns (whichever is longer, whole panels
//!    each), after every thread packed its share of B (and of A, where the
//!    split is by columns; split by rows, each thread packs its own rows of
//!    A as it goes, [`LAZY_PANELS`] panels by one block of depth at a time,
//!    so that the packed block stays in its L2; see [`ASource`]). Packing a
//!    row-major f32 A transposes 16 x 16 words in registers. Each
//!    thread runs its block [`KC`] words of depth at a time, tile by tile
//!    (row panel by row panel where the depth is one block, else column
//!    panel by column panel; see [`block`]), the micro-kernel: `MR x NR`
//!    f32 accumulators (24 zmm, or 12 ymm registers), two B loads and `MR`
//!    broadcasts per word of depth (at constant offsets where A is packed).
//!    Transposed B (a weight read as `W^T`)
//!    is packed in square blocks of words (16 x 16, or AVX's 8 x 8)
//!    transposed in registers.
//! 3. The micro-kernel writes `alpha` times its sums (the first block of
//!    depth) or adds them (the others), with masked stores at the right edge
//!    and only the rows that exist at the bottom edge.
//!
//! Nothing here runs unless [`Kernel::available`] says the CPU has the
//! instructions; the registry measures each candidate against the others
//! and keeps it only where it is faster.

use super::team::Team;
use crate::artifact::LibraryGemm;

/// Words of depth per block. B's micro-panel (`KC x NR` words: 32 KiB
/// for AVX-512's, 16 KiB for AVX2's) is read from L1 and L2 while A's
/// block streams by; a sweep of 64 to 512 on the compared workloads'
/// shapes (AMD Zen 4, 2 threads) found 256 to 512 best for both element
/// types, 64 up to 20% slower.
const KC: usize = 256;

/// Which of the kernels: the instructions, and the operands' element type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kernel {
    /// f32 operands, AVX-512F (`vfmadd231ps` on zmm registers).
    Avx512F32,
    /// bf16 operands, AVX-512 BF16 (`vdpbf16ps`).
    Avx512Bf16,
    /// f32 operands, AVX2 and FMA (`vfmadd231ps` on ymm registers): the
    /// CPUs without AVX-512, and a build held to x86-64-v3.
    Avx2F32,
}

impl Kernel {
    /// Whether this CPU has the instructions the kernel uses.
    pub fn available(self) -> bool {
        #[cfg(target_arch = "x86_64")]
        {
            use std::arch::is_x86_feature_detected as has;
            match self {
                Kernel::Avx512F32 => has!("avx512f"),
                Kernel::Avx512Bf16 => has!("avx512f") && has!("avx512bf16"),
                Kernel::Avx2F32 => has!("avx2") && has!("fma"),
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            false
        }
    }
}

/// Packing buffers, one pair (A, B) per thread, kept by the module from
/// call to call so their pages are touched once.
#[derive(Default)]
pub struct Packed {
    buffers: Vec<(Vec<u32>, Vec<u32>)>,
}

/// Words in a cache line: the packed panels start on one, so that a vector
/// load of B's words (64 bytes, 16 words of a panel row) never spans two
/// lines (a split load takes a second L1 access on Intel's cores; the
/// allocator's large blocks start 16 bytes past a page).
const LINE_WORDS: usize = 16;

/// The first cache-line-aligned word of `buffer` (which holds
/// [`LINE_WORDS`] words more than it is used for, or is unused and empty).
fn line_aligned(buffer: &mut [u32]) -> *mut u32 {
    let skip = buffer.as_ptr().align_offset(64).min(LINE_WORDS).min(buffer.len());
    buffer[skip..].as_mut_ptr()
}

/// Raw pointers the pool's tasks share (each writes its own part).
#[derive(Clone, Copy)]
struct Shared<T>(*mut T);
// SAFETY: the memory outlives the scope that shares the pointer, and the
// tasks write disjoint parts of it (their panels, their rows or columns).
unsafe impl<T> Send for Shared<T> {}
unsafe impl<T> Sync for Shared<T> {}
impl<T> Shared<T> {
    fn get(self) -> *mut T {
        self.0
    }
}

/// One element type's packing and micro-kernel.
trait Element {
    /// Elements of `k` per packed word.
    const PER_WORD: usize;
    /// The word of depth `u` of the vector whose element `kk` is element
    /// `base + kk * step` of `x` (elements past `k` read as zero).
    ///
    /// # Safety
    /// The elements below `k` lie inside the operand.
    unsafe fn word(x: *const u8, base: usize, step: usize, u: usize, k: usize) -> u32;
    /// The words of depth `u` of B's columns `col0 .. col0 + cols` (B's
    /// rows contiguous, `row_stride` elements apart) into `dst`, the rest
    /// of its `nr` words zero.
    ///
    /// # Safety
    /// As [`Element::word`], for each column; `dst` holds `nr` words.
    #[allow(clippy::too_many_arguments)]
    unsafe fn row_words(
        x: *const u8,
        row_stride: usize,
        col0: usize,
        cols: usize,
        u: usize,
        k: usize,
        dst: *mut u32,
        nr: usize,
    );
}

/// A micro-kernel and what it reads: an element type packed into words,
/// `MR x NR` tiles of C, and the square blocks of words its ISA transposes
/// in registers when it packs a transposed B.
trait Micro {
    type E: Element;
    /// Rows of a micro-tile.
    const MR: usize;
    /// Columns of a micro-tile (whole vector registers).
    const NR: usize;
    /// The edge of the blocks [`Micro::TRANSPOSE`] transposes (`NR` is a
    /// multiple of it).
    const TRANSPOSED: usize;
    /// `MR x NR` sums over `kc` words of depth, written to `out` (see
    /// [`MicroFn`]).
    const MICRO: MicroFn;
    /// [`Micro::MICRO`] for packed A (`row = 4`, `step = 4 * MR`), its
    /// addresses constant offsets (no address arithmetic per word).
    const MICRO_PACKED: MicroFn;
    /// Transposes `TRANSPOSED x TRANSPOSED` words (see [`TransposeFn`]).
    const TRANSPOSE: TransposeFn;
    /// A micro-kernel of fewer rows than `MR`, on packed A, for a tile of
    /// `rows`, where the kernel has one: the last row panel of a product
    /// whose rows are not a multiple of `MR` (always packed, also where A
    /// is read where it lies) multiplies only its rows (64 rows are five
    /// tiles of 12 and one of 4, where six of 12 spent 11% of the
    /// product's multiply-adds on rows of zeros).
    fn short(_rows: usize) -> Option<MicroFn> {
        None
    }
    /// Packs a row panel of f32 A with contiguous rows, 16 words of depth
    /// at a time, where the kernel has such a routine (see
    /// [`PackRowsFn`]).
    const PACK_A_ROWS: Option<PackRowsFn> = None;
}

/// Packs `rows` rows of f32 A (`rs` words apart) into a row panel, their
/// first `whole` words (a multiple of 16); rows of the panel past `rows`
/// are zero there.
///
/// # Safety
/// The CPU has the kernel's instructions; the rows' first `whole` words
/// lie inside A and the panel holds `whole * MR` words.
type PackRowsFn = unsafe fn(*const f32, usize, usize, usize, *mut u32);

/// A micro-kernel: `MR x NR` sums over `kc` words of depth, written to
/// `out`.
///
/// # Safety
/// The CPU has the kernel's instructions; `a` reads `MR` rows of `kc`
/// words, `b` holds `kc * NR` words; `out` as the kernel's store requires
/// (its rows `out.ldc` apart inside C).
type MicroFn = unsafe fn(usize, AWords, *const u32, Out);

/// Writes the transpose of the square block of words at `src` (rows
/// `src_stride` bytes apart) to `dst` (rows `dst_stride` words apart).
///
/// # Safety
/// The CPU has the kernel's instructions; the rows at `src` and `dst` lie
/// inside their buffers.
type TransposeFn = unsafe fn(*const u8, usize, *mut u32, usize);

/// AVX-512's f32 kernel: 12 x 2 zmm accumulators, 2 for B, 1 broadcast.
struct Avx512F32;
/// AVX-512 BF16's kernel: as [`Avx512F32`], on pairs of bf16.
struct Avx512Bf16;
/// AVX2's f32 kernel (with FMA): 6 x 2 ymm accumulators, 2 for B, 1
/// broadcast: 15 of the 16 registers.
struct Avx2F32;

impl Micro for Avx512F32 {
    type E = F32;
    const MR: usize = 12;
    const NR: usize = 32;
    const TRANSPOSED: usize = 16;
    const MICRO: MicroFn = micro_f32::<false, 12>;
    const MICRO_PACKED: MicroFn = micro_f32::<true, 12>;
    fn short(rows: usize) -> Option<MicroFn> {
        match rows {
            0..=4 => Some(micro_f32::<true, 4>),
            5..=8 => Some(micro_f32::<true, 8>),
            _ => None,
        }
    }
    const TRANSPOSE: TransposeFn = transpose16;
    const PACK_A_ROWS: Option<PackRowsFn> = Some(pack_a_rows16);
}

impl Micro for Avx512Bf16 {
    type E = Bf16;
    const MR: usize = Avx512F32::MR;
    const NR: usize = Avx512F32::NR;
    const TRANSPOSED: usize = Avx512F32::TRANSPOSED;
    const MICRO: MicroFn = micro_bf16::<false, 12>;
    const MICRO_PACKED: MicroFn = micro_bf16::<true, 12>;
    fn short(rows: usize) -> Option<MicroFn> {
        match rows {
            0..=4 => Some(micro_bf16::<true, 4>),
            5..=8 => Some(micro_bf16::<true, 8>),
            _ => None,
        }
    }
    const TRANSPOSE: TransposeFn = Avx512F32::TRANSPOSE;
}

impl Micro for Avx2F32 {
    type E = F32;
    const MR: usize = 6;
    const NR: usize = 16;
    const TRANSPOSED: usize = 8;
    const MICRO: MicroFn = micro_avx2::<false>;
    const MICRO_PACKED: MicroFn = micro_avx2::<true>;
    const TRANSPOSE: TransposeFn = transpose8;
}

struct F32;
struct Bf16;

impl Element for F32 {
    const PER_WORD: usize = 1;
    #[inline(always)]
    unsafe fn word(x: *const u8, base: usize, step: usize, u: usize, _k: usize) -> u32 {
        // SAFETY: the caller's contract.
        unsafe { (x as *const u32).add(base + u * step).read_unaligned() }
    }
    #[inline(always)]
    unsafe fn row_words(
        x: *const u8,
        rs: usize,
        col0: usize,
        cols: usize,
        u: usize,
        _k: usize,
        dst: *mut u32,
        nr: usize,
    ) {
        // SAFETY: the caller's contract.
        unsafe {
            std::ptr::copy_nonoverlapping((x as *const u32).add(u * rs + col0), dst, cols);
            std::ptr::write_bytes(dst.add(cols), 0, nr - cols);
        }
    }
}

impl Element for Bf16 {
    const PER_WORD: usize = 2;
    #[inline(always)]
    unsafe fn word(x: *const u8, base: usize, step: usize, u: usize, k: usize) -> u32 {
        let x = x as *const u16;
        let kk = 2 * u;
        // SAFETY: the caller's contract.
        unsafe {
            let lo = *x.add(base + kk * step) as u32;
            let hi = if kk + 1 < k { *x.add(base + (kk + 1) * step) as u32 } else { 0 };
            lo | hi << 16
        }
    }
    #[inline(always)]
    unsafe fn row_words(
        x: *const u8,
        rs: usize,
        col0: usize,
        cols: usize,
        u: usize,
        k: usize,
        dst: *mut u32,
        nr: usize,
    ) {
        let x = x as *const u16;
        // SAFETY: the caller's contract. The loops interleave rows 2u and
        // 2u+1 (the compiler vectorises them).
        unsafe {
            let row0 = x.add(2 * u * rs + col0);
            if 2 * u + 1 < k {
                let row1 = x.add((2 * u + 1) * rs + col0);
                for j in 0..cols {
                    *dst.add(j) = *row0.add(j) as u32 | (*row1.add(j) as u32) << 16;
                }
            } else {
                for j in 0..cols {
                    *dst.add(j) = *row0.add(j) as u32;
                }
            }
            std::ptr::write_bytes(dst.add(cols), 0, nr - cols);
        }
    }
}

/// Rows of C that are complete, for the caller's epilogue: called with a
/// range of the output's rows (counted over the batch, `batch * m + row`)
/// on the thread that computed them, while they are still in its caches.
pub type RowsDone<'a> = &'a (dyn Fn(usize, usize) + Sync);

/// `c[batch] = alpha * A[batch] B[batch]` (f32, row-major `m x n`) for
/// operands `a` and `b` of `kernel`'s type, read through `g`'s strides, on
/// `threads` of `pool`'s threads (1: the calling thread alone). Where
/// `rows_done` is given and the work splits by rows, it is called for
/// every row of C exactly once, as soon as a group of rows is complete;
/// the return value says whether that happened (else the caller runs its
/// epilogue over C after the call).
///
/// # Safety
/// [`Kernel::available`] holds for `kernel`; `a`, `b` and `c` hold the matrices
/// `g` describes (`c`: `batch * m * n` values).
pub unsafe fn gemm(
    pool: &Team,
    threads: usize,
    packed: &mut Packed,
    g: &LibraryGemm,
    kernel: Kernel,
    a: *const u8,
    b: *const u8,
    c: *mut f32,
    rows_done: Option<RowsDone>,
) -> bool {
    // SAFETY: the caller's contract.
    unsafe { gemm_packing(pool, threads, packed, g, kernel, (a, b, c), rows_done, LAZY_B_BYTES) }
}

/// [`gemm`], packing B a panel at a time where it is at least `lazy_b_bytes`
/// (the tests set 0 to cover that path on small products).
///
/// # Safety
/// As [`gemm`].
#[allow(clippy::too_many_arguments)]
unsafe fn gemm_packing(
    pool: &Team,
    threads: usize,
    packed: &mut Packed,
    g: &LibraryGemm,
    kernel: Kernel,
    (a, b, c): (*const u8, *const u8, *mut f32),
    rows_done: Option<RowsDone>,
    lazy_b_bytes: usize,
) -> bool {
    // SAFETY: the caller's contract.
    unsafe {
        match kernel {
            Kernel::Avx512F32 => gemm_of::<Avx512F32>(pool, threads, packed, g, a, b, c, rows_done, lazy_b_bytes),
            Kernel::Avx512Bf16 => gemm_of::<Avx512Bf16>(pool, threads, packed, g, a, b, c, rows_done, lazy_b_bytes),
            Kernel::Avx2F32 => gemm_of::<Avx2F32>(pool, threads, packed, g, a, b, c, rows_done, lazy_b_bytes),
        }
    }
}

/// How the micro-kernel reads A: word `(r, u)` of row panel `rp` (row
/// `rp * MR + r`, word of depth `u`) lies at byte
/// `base + rp * panel + r * row + u * step`. Packed panels have
/// `row = 4`, `step = 4 * MR`; A with contiguous rows is read where it lies
/// (`row` its row stride, `step` 4), but for its last, partial, panel,
/// which is packed apart (`tail`) so that no read passes its last row.
#[derive(Clone, Copy)]
struct APanels {
    base: *const u8,
    panel: usize,
    row: usize,
    step: usize,
    /// The last row panel, packed, where `base` reads A itself and `m` is
    /// not a multiple of `MR`.
    tail: Option<*const u8>,
}

/// The sizes of one product's packed operands, in words: the depth (words
/// per row of A or column of B), A's panels (where A is packed; else its
/// last panel), B's panels.
fn packed_sizes<K: Micro>(g: &LibraryGemm, direct_a: bool) -> (usize, usize, usize) {
    let (mr, nr) = (K::MR, K::NR);
    let depth = g.k.div_ceil(K::E::PER_WORD);
    let a_words = if direct_a { depth * mr } else { g.m.div_ceil(mr) * depth * mr };
    (depth, a_words, g.n.div_ceil(nr) * depth * nr)
}

/// Whether A is read where it lies: its rows are contiguous, each word of
/// depth is whole (an f32, or a pair of bf16 that never passes the row's
/// end: `k` even), and its rows are not a multiple of 2 KiB apart: the
/// L1's set is bits 6-11 of the address, so 12 rows 4 KiB apart (an
/// AVX-512 tile's) would share one set of 8 ways and evict each other at
/// every step (measured: a 1024 x 256 x 1024 product at 0.68x the packed
/// speed); AVX2's 6 rows keep the same rule, unmeasured apart.
fn reads_a_directly<K: Micro>(g: &LibraryGemm) -> bool {
    let row_bytes = g.a_strides[0] * 4 / K::E::PER_WORD;
    g.a_strides[1] == 1 && g.k % K::E::PER_WORD == 0 && row_bytes % 2048 != 0
}

#[allow(clippy::too_many_arguments)]
unsafe fn gemm_of<K: Micro>(
    pool: &Team,
    threads: usize,
    packed: &mut Packed,
    g: &LibraryGemm,
    a: *const u8,
    b: *const u8,
    c: *mut f32,
    rows_done: Option<RowsDone>,
    lazy_b_bytes: usize,
) -> bool {
    let (m, n) = (g.m, g.n);
    if m == 0 || n == 0 || g.batch == 0 {
        return false;
    }
    let elem = if K::E::PER_WORD == 2 { 2 } else { 4 };
    let direct_a = reads_a_directly::<K>(g);
    let (depth, a_words, b_words) = packed_sizes::<K>(g, direct_a);
    if depth == 0 {
        // SAFETY: c holds batch * m * n values.
        unsafe { std::ptr::write_bytes(c, 0, g.batch * m * n) };
        return false;
    }
    let threads = threads.clamp(1, pool.threads());
    // A product per thread where the batch covers the threads.
    let per_batch = g.batch >= threads && threads > 1;
    let (row_panels, col_panels) = (m.div_ceil(K::MR), n.div_ceil(K::NR));
    // One product split by rows: each thread packs its own rows of A, a
    // group of panels by a block of depth at a time (`ASource::Lazy`).
    let by_rows = row_panels * K::MR >= col_panels * K::NR || threads == 1;
    let lazy = !per_batch && by_rows && !direct_a;
    // One product split by columns, over a B too large for the caches:
    // each thread packs its own columns of B, a panel by a block of depth
    // at a time (`BSource::Lazy`), and every row panel runs over it from
    // L1 and L2. No thread reads another's panels, so packing all of B
    // first only sent it out to memory and back. See [`LAZY_B_BYTES`].
    // Only where the depth is several blocks: over one block the row
    // panels go first (C written row by row), which needs every column
    // panel packed (measured: 1728 x 2048 x 64 at 0.86x of that order).
    let lazy_b = !per_batch && !by_rows && depth > KC && b_words * 4 >= lazy_b_bytes;
    let sets = if per_batch || lazy || lazy_b { threads } else { 1 };
    if packed.buffers.len() < sets {
        packed.buffers.resize_with(sets, Default::default);
    }
    let a_words = if lazy { LAZY_PANELS.min(row_panels) * KC.min(depth) * K::MR } else { a_words };
    let b_words = if lazy_b { KC.min(depth) * K::NR } else { b_words };
    for (t, (pa, pb)) in packed.buffers[..sets].iter_mut().enumerate() {
        // Grown, never shrunk (`grown`): resizing to each product's size
        // filled the tail with zeros again after every smaller product.
        // One A for all the threads where the split is by columns.
        if t == 0 || per_batch || lazy {
            super::grown(pa, a_words + LINE_WORDS);
        }
        // One B for all the threads where the split is by rows.
        if t == 0 || per_batch || lazy_b {
            super::grown(pb, b_words + LINE_WORDS);
        }
    }
    let buffers: Vec<(Shared<u32>, Shared<u32>)> = packed.buffers[..sets]
        .iter_mut()
        .map(|(pa, pb)| (Shared(line_aligned(pa)), Shared(line_aligned(pb))))
        .collect();
    let partial = m % K::MR != 0;
    // How the micro-kernel reads one batch's A, packed into `pa` or not.
    let a_panels = move |a: *const u8, pa: *const u32| {
        if direct_a {
            APanels {
                base: a,
                panel: K::MR * g.a_strides[0] * elem,
                row: g.a_strides[0] * elem,
                step: 4,
                tail: partial.then_some(pa as *const u8),
            }
        } else {
            APanels { base: pa as *const u8, panel: depth * K::MR * 4, row: 4, step: 4 * K::MR, tail: None }
        }
    };
    // Packs row panels `lo..hi` of A (or, read directly, its partial last
    // panel if among them) into `pa`.
    let pack_a_panels = move |a: *const u8, pa: *mut u32, (lo, hi): (usize, usize)| {
        // SAFETY: the panels lie inside the packed A; A's reads inside A.
        unsafe {
            if !direct_a {
                pack_a::<K>(g, a, (lo, hi), (0, depth), pa.add(lo * depth * K::MR));
            } else if partial && hi == row_panels && lo < hi {
                pack_a::<K>(g, a, (row_panels - 1, row_panels), (0, depth), pa);
            }
        }
    };
    // The batch's operands and output (inside them: the caller's contract).
    let (a, b, c) = (Shared(a as *mut u8), Shared(b as *mut u8), Shared(c));
    let operand = move |batch: usize| {
        (
            Shared(a.get().wrapping_add(batch * g.a_batch * elem)),
            Shared(b.get().wrapping_add(batch * g.b_batch * elem)),
            Shared(c.get().wrapping_add(batch * m * n)),
        )
    };
    if per_batch {
        let buffers = &buffers;
        pool.run(threads, &|t| {
            let (pa, pb) = buffers[t];
            for batch in g.batch * t / threads..g.batch * (t + 1) / threads {
                let (a, b, c) = operand(batch);
                pack_a_panels(a.get(), pa.get(), (0, row_panels));
                let done = rows_done.map(|f| move |lo: usize, hi: usize| f(batch * m + lo, batch * m + hi));
                let done = done.as_ref().map(|f| f as &(dyn Fn(usize, usize) + Sync));
                // SAFETY: this piece's buffers and batches.
                unsafe {
                    pack_b::<K>(g, b.get(), (0, col_panels), (0, depth), pb.get());
                    let panels = ASource::Panels(a_panels(a.get(), pa.get()));
                    let b = BSource::Packed(pb.get());
                    block::<K>(g, depth, (0, row_panels), (0, col_panels), panels, b, c.get(), done);
                }
            }
        });
        return rows_done.is_some();
    }
    let (pa, pb) = buffers[0];
    // One product: each thread its block of whole panels, rows where the
    // output is taller than wide, else columns; whole rows are one thread's
    // (and go to `rows_done`) only where the rows are split.
    let rows_done = rows_done.filter(|_| by_rows);
    let buffers = &buffers;
    for batch in 0..g.batch {
        let (a, b, c) = operand(batch);
        // 1. Pack, each thread its share of both operands' panels.
        let pack = |t: usize| {
            let share = |total: usize| (total * t / threads, total * (t + 1) / threads);
            if !lazy {
                pack_a_panels(a.get(), pa.get(), share(row_panels));
            }
            if !lazy_b {
                let (lo, hi) = share(col_panels);
                // SAFETY: the panels lie inside the packed B; B's reads inside B.
                unsafe { pack_b::<K>(g, b.get(), (lo, hi), (0, depth), pb.get().add(lo * depth * K::NR)) };
            }
        };
        // 2. Each thread its block.
        let done = rows_done.map(|f| move |lo: usize, hi: usize| f(batch * m + lo, batch * m + hi));
        let done = done.as_ref().map(|f| f as &(dyn Fn(usize, usize) + Sync));
        let compute = |t: usize| {
            let long = if by_rows { row_panels } else { col_panels };
            let (lo, hi) = (long * t / threads, long * (t + 1) / threads);
            let (rows, cols) = if by_rows { ((lo, hi), (0, col_panels)) } else { ((0, row_panels), (lo, hi)) };
            let source = if lazy {
                ASource::Lazy { a: a.get(), buffer: buffers[t].0.get() }
            } else {
                ASource::Panels(a_panels(a.get(), pa.get()))
            };
            let b_source = if lazy_b {
                BSource::Lazy { b: b.get(), buffer: buffers[t].1.get() }
            } else {
                BSource::Packed(pb.get())
            };
            // SAFETY: the tasks' blocks of C are disjoint; the packed panels
            // are complete (the pack phase joined first); a lazy source's
            // buffer is this piece's.
            unsafe { block::<K>(g, depth, rows, cols, source, b_source, c.get(), done) };
        };
        if threads == 1 {
            pack(0);
            compute(0);
        } else {
            pool.run(threads, &pack);
            pool.run(threads, &compute);
        }
    }
    rows_done.is_some()
}

/// Words of depth a transposing pack handles at a time: their slice of the
/// packed panel (8 KiB of B's, 3 KiB of A's) stays in L1 while the
/// columns are gathered into it.
const PACK_CHUNK: usize = 64;

/// Packs words `u_lo..u_hi` of depth of A's row panels `lo..hi` (each
/// `u_hi - u_lo` groups of `MR` words) into `out` (where panel `lo`
/// starts); rows past `m` are zero.
///
/// # Safety
/// `a` holds A as `g` describes; `out` has `(hi - lo) * (u_hi - u_lo) * MR`
/// words.
unsafe fn pack_a<K: Micro>(
    g: &LibraryGemm,
    a: *const u8,
    (lo, hi): (usize, usize),
    (u_lo, u_hi): (usize, usize),
    out: *mut u32,
) {
    let [rs, cs] = g.a_strides;
    let span = u_hi - u_lo;
    let rows = |panel: usize| K::MR.min(g.m - panel * K::MR);
    let at = |panel: usize, u: usize, r: usize| out.wrapping_add((panel - lo) * span * K::MR + (u - u_lo) * K::MR + r);
    // SAFETY (every access): row i < m, depth below k (`word`), and the
    // word inside the panel.
    unsafe {
        if cs == 1 {
            // Rows contiguous: blocks of 16 words of depth transposed in
            // registers where the kernel can (the scalar loop wrote each
            // word 48 bytes from the last: a 1024 x 1024 A took 1 ms of a
            // 4 ms product on an Intel Xeon, EMR), the rest a row at a time.
            let whole = match K::PACK_A_ROWS {
                Some(_) if K::E::PER_WORD == 1 => span / 16 * 16,
                _ => 0,
            };
            for panel in lo..hi {
                if let (Some(pack), true) = (K::PACK_A_ROWS, whole > 0) {
                    let first = (a as *const f32).add(panel * K::MR * rs + u_lo);
                    pack(first, rs, rows(panel), whole, at(panel, u_lo, 0));
                }
                for r in 0..rows(panel) {
                    let base = (panel * K::MR + r) * rs;
                    for u in u_lo + whole..u_hi {
                        *at(panel, u, r) = K::E::word(a, base, 1, u, g.k);
                    }
                }
            }
        } else if rs == 1 && K::E::PER_WORD == 1 {
            // Columns contiguous, f32: a panel's word of depth is a run of
            // its rows' words in one stored row, copied as it is.
            for u in u_lo..u_hi {
                for panel in lo..hi {
                    let src = (a as *const u32).add(u * cs + panel * K::MR);
                    // A whole panel's run as a copy of constant length
                    // (inlined as vector moves, not a call to memcpy).
                    if rows(panel) == K::MR {
                        std::ptr::copy_nonoverlapping(src, at(panel, u, 0), K::MR);
                    } else {
                        std::ptr::copy_nonoverlapping(src, at(panel, u, 0), rows(panel));
                    }
                }
            }
        } else if rs == 1 {
            // Columns contiguous, bf16 (the activation gradient of a weight
            // gradient, read as dY^T): a panel's word of depth interleaves
            // the runs of its rows in two stored rows, as B's rows are
            // packed (`row_words`, vectorised); with the scalar gather below,
            // MLP 784's two such products took 5-9% longer (AMD Zen 4).
            for u in u_lo..u_hi {
                for panel in lo..hi {
                    K::E::row_words(a, cs, panel * K::MR, rows(panel), u, g.k, at(panel, u, 0), K::MR);
                }
            }
        } else {
            // Neither rows nor columns contiguous (a strided view): a word
            // of depth of every panel at a time, so that the reads of one
            // column follow each other.
            for u in u_lo..u_hi {
                for panel in lo..hi {
                    for r in 0..rows(panel) {
                        *at(panel, u, r) = K::E::word(a, (panel * K::MR + r) * rs, cs, u, g.k);
                    }
                }
            }
        }
        for panel in lo..hi {
            for u in u_lo..u_hi {
                for r in rows(panel)..K::MR {
                    *at(panel, u, r) = 0;
                }
            }
        }
    }
}

/// Packs words `u_lo..u_hi` of depth of B's column panels `lo..hi` (each
/// `u_hi - u_lo` groups of `NR` words) into `out` (where panel `lo`
/// starts); columns past `n` are zero. `u_lo` is a multiple of
/// `TRANSPOSED` (a block of depth starts at a multiple of [`KC`]).
///
/// # Safety
/// `b` holds B as `g` describes; `out` has `(hi - lo) * (u_hi - u_lo) * NR`
/// words.
unsafe fn pack_b<K: Micro>(
    g: &LibraryGemm,
    b: *const u8,
    (lo, hi): (usize, usize),
    (u_lo, u_hi): (usize, usize),
    out: *mut u32,
) {
    let [rs, cs] = g.b_strides;
    let words = u_hi - u_lo;
    for panel in lo..hi {
        let out = out.wrapping_add((panel - lo) * words * K::NR);
        // Word u of depth's NR words.
        let at = |u: usize| out.wrapping_add((u - u_lo) * K::NR);
        let cols = K::NR.min(g.n - panel * K::NR);
        // SAFETY (every access): column j < n, depth below k, and the
        // word's slot inside the panel's `words * NR`.
        unsafe {
            if cs == 1 {
                // Rows contiguous: a row's columns at a time.
                for u in u_lo..u_hi {
                    K::E::row_words(b, rs, panel * K::NR, cols, u, g.k, at(u), K::NR);
                }
                continue;
            }
            // Columns contiguous (a transposed operand, as a weight read
            // as W^T): whole square blocks of words (16 x 16, AVX-2's
            // 8 x 8) transposed in registers, the edges as below.
            let whole = g.k / K::E::PER_WORD;
            let t = K::TRANSPOSED;
            if rs == 1 && cols == K::NR && whole >= t {
                let bytes = 4 / K::E::PER_WORD;
                let column = |j: usize| b.wrapping_add((panel * K::NR + j) * cs * bytes);
                let vectored = (whole / t * t).clamp(u_lo, u_hi);
                for u0 in (u_lo..vectored).step_by(t) {
                    for j0 in (0..K::NR).step_by(t) {
                        (K::TRANSPOSE)(column(j0).wrapping_add(u0 * 4), cs * bytes, at(u0).add(j0), K::NR);
                    }
                }
                for j in 0..K::NR {
                    let base = (panel * K::NR + j) * cs;
                    for u in vectored..u_hi {
                        *at(u).add(j) = K::E::word(b, base, rs, u, g.k);
                    }
                }
                continue;
            }
            // Else each column's words along k, a chunk of depth at a time.
            for u0 in (u_lo..u_hi).step_by(PACK_CHUNK) {
                let u1 = (u0 + PACK_CHUNK).min(u_hi);
                for j in 0..cols {
                    let base = (panel * K::NR + j) * cs;
                    for u in u0..u1 {
                        *at(u).add(j) = K::E::word(b, base, rs, u, g.k);
                    }
                }
                for u in u0..u1 {
                    for j in cols..K::NR {
                        *at(u).add(j) = 0;
                    }
                }
            }
        }
    }
}

/// Asks for share `part` of `parts` of the cache lines of column panel
/// `cp`'s words `u_lo..u_hi` of depth to be brought into L2 (a hint: it
/// reads nothing and never faults).
fn prefetch_b<K: Micro>(
    g: &LibraryGemm,
    b: *const u8,
    cp: usize,
    (u_lo, u_hi): (usize, usize),
    (part, parts): (usize, usize),
) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_MM_HINT_T1, _mm_prefetch};
        let [rs, cs] = g.b_strides;
        let bytes = 4 / K::E::PER_WORD;
        let (col0, cols) = (cp * K::NR, K::NR.min(g.n - cp * K::NR));
        let (k_lo, k_hi) = (u_lo * K::E::PER_WORD, (u_hi * K::E::PER_WORD).min(g.k));
        let fetch = |first: usize, len: usize| {
            let start = b.wrapping_add(first * bytes) as usize & !63;
            let end = b.wrapping_add((first + len) * bytes) as usize;
            for line in (start..end).step_by(64) {
                // SAFETY: a prefetch is a hint; it does not fault.
                unsafe { _mm_prefetch::<_MM_HINT_T1>(line as *const i8) };
            }
        };
        if cs == 1 {
            // Rows contiguous: each row of the depth's share, the panel's
            // columns.
            let (lo, hi) = (k_lo + (k_hi - k_lo) * part / parts, k_lo + (k_hi - k_lo) * (part + 1) / parts);
            for kk in lo..hi {
                fetch(kk * rs + col0, cols);
            }
        } else if rs == 1 {
            // Columns contiguous: each column of the share, the depth.
            for j in col0 + cols * part / parts..col0 + cols * (part + 1) / parts {
                fetch(j * cs + k_lo, k_hi - k_lo);
            }
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (g, b, cp, u_lo, u_hi, part, parts);
}

/// Writes the transpose of the 16 x 16 words at `src` (rows
/// `src_stride` bytes apart) to `dst` (rows `dst_stride` words apart):
/// word `i` of source row `r` becomes word `r` of destination row `i`.
///
/// # Safety
/// The CPU has AVX-512F; the 16 rows of 64 bytes at `src` and at `dst`
/// lie inside their buffers.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn transpose16(src: *const u8, src_stride: usize, dst: *mut u32, dst_stride: usize) {
    use std::arch::x86_64::*;
    // SAFETY: the caller's contract.
    let r: [__m512; 16] = std::array::from_fn(|i| unsafe { _mm512_loadu_ps(src.add(i * src_stride) as *const f32) });
    for (i, v) in transposed16(r).into_iter().enumerate() {
        // SAFETY: the caller's contract.
        unsafe { _mm512_storeu_ps(dst.add(i * dst_stride) as *mut f32, v) };
    }
}

/// The transpose of 16 rows of 16 words: word `i` of row `r` becomes word
/// `r` of row `i`. Four rounds of shuffles: pairs of words, pairs of
/// pairs, then the 128-bit lanes twice.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
fn transposed16(r: [std::arch::x86_64::__m512; 16]) -> [std::arch::x86_64::__m512; 16] {
    use std::arch::x86_64::*;
    // Rows 2p and 2p+1 interleaved: words 0, 1 of each lane (lo), 2, 3 (hi).
    let a: [__m512d; 16] = std::array::from_fn(|i| {
        let (x, y) = (r[i / 2 * 2], r[i / 2 * 2 + 1]);
        _mm512_castps_pd(if i % 2 == 0 { _mm512_unpacklo_ps(x, y) } else { _mm512_unpackhi_ps(x, y) })
    });
    // c[4q + e]: lane L holds rows 4q..4q+3 of word 4L + e.
    let c: [__m512; 16] = std::array::from_fn(|i| {
        let (q, e) = (i / 4, i % 4);
        let (x, y) = (a[4 * q + e / 2], a[4 * q + 2 + e / 2]);
        _mm512_castpd_ps(if e % 2 == 0 { _mm512_unpacklo_pd(x, y) } else { _mm512_unpackhi_pd(x, y) })
    });
    let mut out = [_mm512_setzero_ps(); 16];
    for e in 0..4 {
        let [c0, c1, c2, c3] = [c[e], c[4 + e], c[8 + e], c[12 + e]];
        let d0 = _mm512_shuffle_f32x4::<0x44>(c0, c1);
        let d1 = _mm512_shuffle_f32x4::<0xee>(c0, c1);
        let d2 = _mm512_shuffle_f32x4::<0x44>(c2, c3);
        let d3 = _mm512_shuffle_f32x4::<0xee>(c2, c3);
        out[e] = _mm512_shuffle_f32x4::<0x88>(d0, d2);
        out[4 + e] = _mm512_shuffle_f32x4::<0xdd>(d0, d2);
        out[8 + e] = _mm512_shuffle_f32x4::<0x88>(d1, d3);
        out[12 + e] = _mm512_shuffle_f32x4::<0xdd>(d1, d3);
    }
    out
}

/// Packs `rows` (at most [`MR512`]) f32 rows of A, `rs` words apart, into
/// one row panel of AVX-512's f32 kernel: word `u` of row `r` to
/// `out[u * MR512 + r]`, for the first `whole` words of each row (a
/// multiple of 16). Sixteen words of every row are read at a time (a cache
/// line each) and transposed in registers; each of the 16 words of depth
/// is then one masked store of the panel's 12 rows. Rows past `rows` are
/// zero.
///
/// # Safety
/// The CPU has AVX-512F; the rows' first `whole` words lie inside A and
/// `out` holds `whole * MR512` words.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn pack_a_rows16(a: *const f32, rs: usize, rows: usize, whole: usize, out: *mut u32) {
    use std::arch::x86_64::*;
    let panel_rows: __mmask16 = (1 << MR512) - 1;
    for u0 in (0..whole).step_by(16) {
        // SAFETY (the loads): the caller's contract.
        let r: [__m512; 16] = std::array::from_fn(|i| {
            if i < rows { unsafe { _mm512_loadu_ps(a.add(i * rs + u0)) } } else { _mm512_setzero_ps() }
        });
        for (i, v) in transposed16(r).into_iter().enumerate() {
            // SAFETY: word u0 + i of the panel is inside `out`.
            unsafe { _mm512_mask_storeu_ps(out.add((u0 + i) * MR512) as *mut f32, panel_rows, v) };
        }
    }
}

#[cfg(not(target_arch = "x86_64"))]
unsafe fn transpose16(_: *const u8, _: usize, _: *mut u32, _: usize) {}
#[cfg(not(target_arch = "x86_64"))]
unsafe fn pack_a_rows16(_: *const f32, _: usize, _: usize, _: usize, _: *mut u32) {}

/// Where the micro-kernel writes: a tile of C whose rows are `ldc` apart,
/// of which `height x width` values exist; `alpha` times the sums
/// (`first`) or added to them.
#[derive(Clone, Copy)]
struct Out {
    tile: *mut f32,
    ldc: usize,
    height: usize,
    width: usize,
    alpha: f32,
    first: bool,
}

/// Rows a thread completes together before it hands them to the caller's
/// epilogue (whole row panels: 48 rows are 192 KiB of a 1024-wide f32
/// product, still in L2 when the epilogue reads it).
const DONE_ROWS: usize = 48;

/// Where a thread's block reads A.
#[derive(Clone, Copy)]
enum ASource {
    /// Packed already (every panel, all of the depth), or read where it
    /// lies.
    Panels(APanels),
    /// Packed by the thread itself, [`LAZY_PANELS`] row panels by one block
    /// of depth at a time, into `buffer` (BLIS's order: the packed block is
    /// written to, and read from, this core's L2, where a whole packed A
    /// went out to memory and came back: a 1024 x 1024 A took 0.36 ms of a
    /// 1024 x 256 x 1024 product, 2 threads, Intel Xeon EMR).
    Lazy { a: *const u8, buffer: *mut u32 },
}

/// The packed size of B from which a product split by columns packs B a
/// panel at a time ([`BSource::Lazy`]) rather than all of it first.
/// Measured on an AMD Zen 4 (32 MiB of L3, 2 threads), the AVX-512 and
/// AVX2 kernels alike: a 64 x 2048 x 1728 product (B 14 MB) ran 1.2-1.3x
/// (AVX-512) and 1.6-1.8x (AVX2) faster a panel at a time, where packing all
/// of B wrote it out to memory and read it back; a 64 x 1024 x 1152 one
/// (B 4.7 MB, packed and unpacked inside the L3) ran 0.95x and 0.91x as
/// fast that way, the packing no longer overlapped by its own loop.
const LAZY_B_BYTES: usize = 8 << 20;

/// Where a thread's block reads B.
#[derive(Clone, Copy)]
enum BSource {
    /// Packed already: every column panel, all of the depth.
    Packed(*const u32),
    /// Packed by the thread itself, a column panel by one block of depth
    /// at a time, into `buffer` (`KC x NR` words: 32 KiB of AVX-512's f32
    /// tile), which every row panel then reads.
    Lazy { b: *const u8, buffer: *mut u32 },
}

/// Row panels a thread packs together where it packs its own A
/// ([`ASource::Lazy`]): 16 panels of one block of depth are 192 KiB for
/// AVX-512's f32 tile, well inside a core's L2.
const LAZY_PANELS: usize = 16;

/// One thread's block: row panels `rows.0..rows.1` by column panels
/// `cols.0..cols.1` of C, `KC` words of depth at a time (where B packs
/// lazily: column panel by column panel, each packed once and read by
/// every row panel). With `done` (the
/// block holds whole rows), the last block of depth walks
/// [`DONE_ROWS`] rows (whole row panels) at a time across every column panel and
/// hands each group's rows to `done` as it completes them.
///
/// # Safety
/// A as `a` reads it and B as `b` reads it (where packed already) are
/// complete; the block of C is this piece's; a lazy source's buffer is
/// this piece's and holds [`LAZY_PANELS`] panels of a block of depth (A's)
/// or one panel of a block of depth (B's).
#[allow(clippy::too_many_arguments)]
unsafe fn block<K: Micro>(
    g: &LibraryGemm,
    depth: usize,
    rows: (usize, usize),
    cols: (usize, usize),
    a: ASource,
    b: BSource,
    c: *mut f32,
    done: Option<&(dyn Fn(usize, usize) + Sync)>,
) {
    let last = g.m.div_ceil(K::MR) - 1;
    // Tile (rp, cp) over words u0..u0 + kc, A's words at `aw` (from u0),
    // B's at `bw` (from u0).
    let tile = |aw: AWords, bw: *const u32, u0: usize, kc: usize, rp: usize, cp: usize| {
        let out = Out {
            tile: c.wrapping_add(rp * K::MR * g.n + cp * K::NR),
            ldc: g.n,
            height: K::MR.min(g.m - rp * K::MR),
            width: K::NR.min(g.n - cp * K::NR),
            alpha: g.alpha as f32,
            first: u0 == 0,
        };
        let packed = (aw.1, aw.2) == (4, 4 * K::MR);
        let full = if packed { K::MICRO_PACKED } else { K::MICRO };
        let short = if packed && out.height < K::MR { K::short(out.height) } else { None };
        let micro = short.unwrap_or(full);
        // SAFETY: A's panel and B's hold kc words from u0; the tile's
        // `height x width` values are inside C.
        unsafe { micro(kc, aw, bw, out) };
    };
    // B's words of column panel cp from u0, packed already.
    let packed_b = |pb: *const u32, cp: usize, u0: usize| pb.wrapping_add(cp * depth * K::NR + u0 * K::NR);
    // A's words of row panel rp from u0, packed or in place.
    let placed = |p: APanels, rp: usize, u0: usize| -> AWords {
        let (base, row, step) = match p.tail {
            Some(tail) if rp == last => (tail, 4, 4 * K::MR),
            _ => (p.base.wrapping_add(rp * p.panel), p.row, p.step),
        };
        (base.wrapping_add(u0 * step), row, step)
    };
    // The order of the tiles: where the depth is one block, a row panel's
    // A (12 KiB for AVX-512's tile, 6 for AVX2's) stays in L1 while B's
    // panels pass (measured 5-15% faster with AVX-512 on the transformer's
    // k = 256 products, AMD Zen 4); where it is
    // several, a column panel's B while A's pass (10-20% faster at
    // k = 1024).
    // Where B packs lazily, always column panel by column panel.
    let order = |rows: (usize, usize), cols: (usize, usize), u0: usize, kc: usize, aw: &dyn Fn(usize) -> AWords| {
        match b {
            BSource::Packed(pb) if depth <= KC => {
                for rp in rows.0..rows.1 {
                    for cp in cols.0..cols.1 {
                        tile(aw(rp), packed_b(pb, cp, u0), u0, kc, rp, cp);
                    }
                }
            }
            BSource::Packed(pb) => {
                for cp in cols.0..cols.1 {
                    for rp in rows.0..rows.1 {
                        tile(aw(rp), packed_b(pb, cp, u0), u0, kc, rp, cp);
                    }
                }
            }
            BSource::Lazy { b, buffer } => {
                for cp in cols.0..cols.1 {
                    // SAFETY: the buffer holds a panel of kc words; B's
                    // reads inside B.
                    unsafe { pack_b::<K>(g, b, (cp, cp + 1), (u0, u0 + kc), buffer) };
                    let tiles = rows.1 - rows.0;
                    for rp in rows.0..rows.1 {
                        // The next panel's block is fetched into L2 while
                        // this one's tiles compute, a share before each.
                        if cp + 1 < cols.1 {
                            prefetch_b::<K>(g, b, cp + 1, (u0, u0 + kc), (rp - rows.0, tiles));
                        }
                        tile(aw(rp), buffer, u0, kc, rp, cp);
                    }
                }
            }
        }
    };
    let panels = |rows: (usize, usize), cols: (usize, usize), u0: usize, kc: usize| match a {
        ASource::Panels(p) => order(rows, cols, u0, kc, &|rp| placed(p, rp, u0)),
        ASource::Lazy { a, buffer } => {
            for r0 in (rows.0..rows.1).step_by(LAZY_PANELS) {
                let r1 = (r0 + LAZY_PANELS).min(rows.1);
                // SAFETY: the buffer holds LAZY_PANELS panels of kc words;
                // A's reads inside A.
                unsafe { pack_a::<K>(g, a, (r0, r1), (u0, u0 + kc), buffer) };
                let at =
                    |rp: usize| -> AWords { (buffer.wrapping_add((rp - r0) * kc * K::MR) as *const u8, 4, 4 * K::MR) };
                order((r0, r1), cols, u0, kc, &at);
            }
        }
    };
    let mut u0 = 0;
    while u0 < depth {
        let kc = KC.min(depth - u0);
        match done {
            Some(done) if u0 + kc == depth => {
                let group_panels = DONE_ROWS.div_ceil(K::MR);
                for group in (rows.0..rows.1).step_by(group_panels) {
                    let end = (group + group_panels).min(rows.1);
                    panels((group, end), cols, u0, kc);
                    done(group * K::MR, (end * K::MR).min(g.m));
                }
            }
            _ => panels(rows, cols, u0, kc),
        }
        u0 += kc;
    }
}

// Off x86-64, `Kernel::available` is false and no kernel runs.
#[cfg(not(target_arch = "x86_64"))]
unsafe fn micro_f32<const PACKED: bool, const ROWS: usize>(_: usize, _: AWords, _: *const u32, _: Out) {}
#[cfg(not(target_arch = "x86_64"))]
unsafe fn micro_bf16<const PACKED: bool, const ROWS: usize>(_: usize, _: AWords, _: *const u32, _: Out) {}
#[cfg(not(target_arch = "x86_64"))]
unsafe fn micro_avx2<const PACKED: bool>(_: usize, _: AWords, _: *const u32, _: Out) {}
#[cfg(not(target_arch = "x86_64"))]
unsafe fn transpose8(_: *const u8, _: usize, _: *mut u32, _: usize) {}

/// AVX-512's tile: [`Avx512F32::MR`] rows.
const MR512: usize = Avx512F32::MR;
/// AVX-512's tile: [`Avx512F32::NR`] columns.
const NR512: usize = Avx512F32::NR;

/// Writes the accumulators to `out`.
///
/// # Safety
/// The tile's rows are `out.ldc` apart inside C.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn store<const ROWS: usize>(acc: &[[std::arch::x86_64::__m512; 2]; ROWS], out: Out) {
    use std::arch::x86_64::*;
    let scale = _mm512_set1_ps(out.alpha);
    let mask = |w: usize| -> __mmask16 { if w >= 16 { 0xffff } else { ((1u32 << w) - 1) as u16 } };
    let (m0, m1) = (mask(out.width), mask(out.width.saturating_sub(16)));
    for (r, acc) in acc.iter().enumerate().take(out.height) {
        // SAFETY: row r < height and the masked lanes are inside C.
        unsafe {
            let row = out.tile.add(r * out.ldc);
            for (h, (v, m)) in [(acc[0], m0), (acc[1], m1)].into_iter().enumerate() {
                if m == 0 {
                    continue;
                }
                let dst = row.add(16 * h);
                let v = if out.first {
                    _mm512_mul_ps(v, scale)
                } else {
                    _mm512_fmadd_ps(v, scale, _mm512_maskz_loadu_ps(m, dst))
                };
                _mm512_mask_storeu_ps(dst, m, v);
            }
        }
    }
}

/// A's words as the micro-kernel reads them: word `(r, u)` at byte
/// `ptr + r * row + u * step`.
type AWords = (*const u8, usize, usize);

/// The f32 micro-kernel: `ROWS x NR` sums over `kc` words of depth,
/// written to `out`: `ROWS` is `MR`, or fewer for a last row panel of as
/// few rows (see [`Micro::short`]).
///
/// # Safety
/// `a` reads `ROWS` rows of `kc` words, `b` holds `kc * NR` words; `out` as
/// [`store`] requires, with `out.height <= ROWS`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn micro_f32<const PACKED: bool, const ROWS: usize>(kc: usize, (a, row, step): AWords, b: *const u32, out: Out) {
    use std::arch::x86_64::*;
    // Packed A's words at constant offsets: no address arithmetic per word.
    let (row, step) = if PACKED { (4, 4 * MR512) } else { (row, step) };
    let mut acc = [[_mm512_setzero_ps(); 2]; ROWS];
    for u in 0..kc {
        // SAFETY: inside the panels (the caller's contract).
        unsafe {
            let b0 = _mm512_loadu_ps(b.add(u * NR512) as *const f32);
            let b1 = _mm512_loadu_ps(b.add(u * NR512 + 16) as *const f32);
            let at = a.add(u * step);
            for (r, acc) in acc.iter_mut().enumerate() {
                let t = _mm512_set1_ps((at.add(r * row) as *const f32).read_unaligned());
                acc[0] = _mm512_fmadd_ps(t, b0, acc[0]);
                acc[1] = _mm512_fmadd_ps(t, b1, acc[1]);
            }
        }
    }
    // SAFETY: the caller's contract.
    unsafe { store(&acc, out) };
}

/// The bf16 micro-kernel, as [`micro_f32`] with a word of depth holding a
/// pair of `k`.
///
/// # Safety
/// As [`micro_f32`].
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bf16")]
unsafe fn micro_bf16<const PACKED: bool, const ROWS: usize>(
    kc: usize,
    (a, row, step): AWords,
    b: *const u32,
    out: Out,
) {
    use std::arch::x86_64::*;
    // Packed A's words at constant offsets: no address arithmetic per word.
    let (row, step) = if PACKED { (4, 4 * MR512) } else { (row, step) };
    let mut acc = [[_mm512_setzero_ps(); 2]; ROWS];
    for u in 0..kc {
        // SAFETY: inside the panels (the caller's contract).
        unsafe {
            let b0: __m512bh = std::mem::transmute(_mm512_loadu_si512(b.add(u * NR512) as *const _));
            let b1: __m512bh = std::mem::transmute(_mm512_loadu_si512(b.add(u * NR512 + 16) as *const _));
            let at = a.add(u * step);
            for (r, acc) in acc.iter_mut().enumerate() {
                let word = (at.add(r * row) as *const i32).read_unaligned();
                let t: __m512bh = std::mem::transmute(_mm512_set1_epi32(word));
                acc[0] = _mm512_dpbf16_ps(acc[0], b0, t);
                acc[1] = _mm512_dpbf16_ps(acc[1], b1, t);
            }
        }
    }
    // SAFETY: the caller's contract.
    unsafe { store(&acc, out) };
}

/// AVX2's tile: [`Avx2F32::MR`] rows.
const MR256: usize = Avx2F32::MR;
/// AVX2's tile: [`Avx2F32::NR`] columns.
const NR256: usize = Avx2F32::NR;

/// The AVX2 f32 micro-kernel, as [`micro_f32`] on ymm registers: per word
/// of depth, two loads of B's 16 words, and 6 broadcasts of A's words,
/// each multiplied into two accumulators.
///
/// # Safety
/// As [`micro_f32`], on a CPU with AVX2 and FMA.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn micro_avx2<const PACKED: bool>(kc: usize, (a, row, step): AWords, b: *const u32, out: Out) {
    use std::arch::x86_64::*;
    // Packed A's words at constant offsets: no address arithmetic per word.
    let (row, step) = if PACKED { (4, 4 * MR256) } else { (row, step) };
    let mut acc = [[_mm256_setzero_ps(); 2]; MR256];
    for u in 0..kc {
        // SAFETY: inside the panels (the caller's contract).
        unsafe {
            let b0 = _mm256_loadu_ps(b.add(u * NR256) as *const f32);
            let b1 = _mm256_loadu_ps(b.add(u * NR256 + 8) as *const f32);
            let at = a.add(u * step);
            for (r, acc) in acc.iter_mut().enumerate() {
                let t = _mm256_set1_ps((at.add(r * row) as *const f32).read_unaligned());
                acc[0] = _mm256_fmadd_ps(t, b0, acc[0]);
                acc[1] = _mm256_fmadd_ps(t, b1, acc[1]);
            }
        }
    }
    let scale = _mm256_set1_ps(out.alpha);
    // Lane i of a row's half h exists where 8h + i < width.
    let lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    let mask = |h: usize| _mm256_cmpgt_epi32(_mm256_set1_epi32(out.width as i32 - 8 * h as i32), lanes);
    let masks = [mask(0), mask(1)];
    let whole = out.width >= NR256;
    for (r, acc) in acc.iter().enumerate().take(out.height) {
        // SAFETY: row r < height, and the lanes stored (all, or the masked
        // ones) are inside C.
        unsafe {
            let row = out.tile.add(r * out.ldc);
            for h in 0..2 {
                let dst = row.add(8 * h);
                if whole {
                    let v = if out.first {
                        _mm256_mul_ps(acc[h], scale)
                    } else {
                        _mm256_fmadd_ps(acc[h], scale, _mm256_loadu_ps(dst))
                    };
                    _mm256_storeu_ps(dst, v);
                } else if 8 * h < out.width {
                    let v = if out.first {
                        _mm256_mul_ps(acc[h], scale)
                    } else {
                        _mm256_fmadd_ps(acc[h], scale, _mm256_maskload_ps(dst, masks[h]))
                    };
                    _mm256_maskstore_ps(dst, masks[h], v);
                }
            }
        }
    }
}

/// Writes the transpose of the 8 x 8 words at `src` (rows `src_stride`
/// bytes apart) to `dst` (rows `dst_stride` words apart), as
/// [`transpose16`]: pairs of words, pairs of pairs, then the 128-bit
/// lanes.
///
/// # Safety
/// The CPU has AVX; the 8 rows of 32 bytes at `src` and at `dst` lie
/// inside their buffers.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx")]
unsafe fn transpose8(src: *const u8, src_stride: usize, dst: *mut u32, dst_stride: usize) {
    use std::arch::x86_64::*;
    // SAFETY: the caller's contract.
    let r: [__m256; 8] = std::array::from_fn(|i| unsafe { _mm256_loadu_ps(src.add(i * src_stride) as *const f32) });
    // t[2p]: rows 2p, 2p+1 interleaved, words 0, 1 of each 128-bit lane;
    // t[2p+1]: words 2, 3.
    let t: [__m256; 8] = std::array::from_fn(|i| {
        let (x, y) = (r[i / 2 * 2], r[i / 2 * 2 + 1]);
        if i % 2 == 0 { _mm256_unpacklo_ps(x, y) } else { _mm256_unpackhi_ps(x, y) }
    });
    // s[4q + e]: rows 4q..4q+3 of word e of each 128-bit lane.
    let s: [__m256; 8] = std::array::from_fn(|i| {
        let (q, e) = (i / 4, i % 4);
        let (x, y) = (t[4 * q + e / 2], t[4 * q + 2 + e / 2]);
        if e % 2 == 0 { _mm256_shuffle_ps::<0x44>(x, y) } else { _mm256_shuffle_ps::<0xee>(x, y) }
    });
    for e in 0..4 {
        let lo = _mm256_permute2f128_ps::<0x20>(s[e], s[4 + e]);
        let hi = _mm256_permute2f128_ps::<0x31>(s[e], s[4 + e]);
        // SAFETY: the caller's contract.
        unsafe {
            _mm256_storeu_ps(dst.add(e * dst_stride) as *mut f32, lo);
            _mm256_storeu_ps(dst.add((4 + e) * dst_stride) as *mut f32, hi);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use half::bf16;

    /// A GEMM description as the compiler writes one, for operands laid out
    /// as `ta`/`tb` say (transposed: stored as their transpose).
    fn describe(batch: usize, shape: (usize, usize, usize), ta: bool, tb: bool, alpha: f64) -> LibraryGemm {
        LibraryGemm { alpha, ..LibraryGemm::contiguous(batch, shape, ta, tb) }
    }

    /// Values in [-2, 2) with bf16's 8 significant bits (so both element
    /// types multiply the same numbers), from a fixed sequence.
    fn values(len: usize, seed: u64) -> Vec<f32> {
        let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
        (0..len)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                bf16::from_f32(((x >> 11) as f64 / (1u64 << 53) as f64 * 4.0 - 2.0) as f32).to_f32()
            })
            .collect()
    }

    /// Every shape class against f64 sums of the same values, for both
    /// element types: edges in m, n and k (an odd k ends on a half pair),
    /// more than one block of depth, transposed operands, batches split over
    /// threads and not, alpha, and one or two threads; a tall product whose
    /// threads pack their own rows of A in more than one group of panels
    /// (410 x 20 x 300: 35 row panels, a partial one last).
    fn matches_f64_sums(kernel: Kernel) {
        assert!(kernel.available(), "the build saw the instructions but the CPU running the test lacks them");
        let shapes = [
            (1, 1, 1),
            (3, 5, 7),
            (12, 32, 2),
            (13, 33, 3),
            (50, 47, 783),
            (256, 100, 300),
            (7, 300, 257),
            (410, 20, 300),
            // Five rows (the 8-row tile), a product per thread.
            (5, 40, 600),
            // One product split by columns over several blocks of depth
            // (B packed a panel at a time), the last of one word, a
            // 4-row tile at the bottom, an odd k for the bf16 pairs.
            (64, 200, 1101),
        ];
        // Every product as `gemm` packs it, and with B packed a panel at a
        // time wherever the split allows.
        for (threads, lazy_b_bytes) in [(1, LAZY_B_BYTES), (2, LAZY_B_BYTES), (2, 0)] {
            let pool = Team::new(threads, || {}).unwrap();
            let mut packed = Packed::default();
            for (i, &(m, n, k)) in shapes.iter().enumerate() {
                for (ta, tb) in [(false, false), (true, false), (false, true), (true, true)] {
                    let batch = 1 + i % 3;
                    let alpha = if i % 3 == 0 { 0.5 } else { 1.0 };
                    let g = describe(batch, (m, n, k), ta, tb, alpha);
                    let (a, b) = (values(batch * m * k, i as u64 + 1), values(batch * k * n, i as u64 + 100));
                    let mut c = vec![f32::NAN; batch * m * n];
                    let (a16, b16): (Vec<bf16>, Vec<bf16>) = (
                        a.iter().map(|&v| bf16::from_f32(v)).collect(),
                        b.iter().map(|&v| bf16::from_f32(v)).collect(),
                    );
                    let (pa, pb) = match kernel {
                        Kernel::Avx512F32 | Kernel::Avx2F32 => (a.as_ptr() as *const u8, b.as_ptr() as *const u8),
                        Kernel::Avx512Bf16 => (a16.as_ptr() as *const u8, b16.as_ptr() as *const u8),
                    };
                    let operands = (pa, pb, c.as_mut_ptr());
                    unsafe { gemm_packing(&pool, threads, &mut packed, &g, kernel, operands, None, lazy_b_bytes) };
                    for bt in 0..batch {
                        for r in 0..m {
                            for col in 0..n {
                                let (mut sum, mut size) = (0.0f64, 0.0f64);
                                for kk in 0..k {
                                    let av = a[bt * m * k + r * g.a_strides[0] + kk * g.a_strides[1]] as f64;
                                    let bv = b[bt * k * n + kk * g.b_strides[0] + col * g.b_strides[1]] as f64;
                                    sum += av * bv;
                                    size += (av * bv).abs();
                                }
                                let got = c[bt * m * n + r * n + col] as f64;
                                let want = alpha * sum;
                                assert!(
                                    (got - want).abs() <= 1e-6 * (1.0 + k as f64).sqrt() * alpha * size + 1e-30,
                                    "{kernel:?}, {threads} threads (B a panel at a time from {lazy_b_bytes} bytes), batch {bt} of {batch}, \
                                     m {m} n {n} k {k} \
                                     ta {ta} tb {tb}: C[{r},{col}] = {got}, want {want}"
                                );
                            }
                        }
                    }
                }
            }
        }
    }

    #[test]
    #[cfg_attr(not(aicf_avx512f), ignore = "needs a CPU with AVX-512; the build found none")]
    fn the_f32_gemm_matches_f64_sums_for_every_layout_and_edge() {
        matches_f64_sums(Kernel::Avx512F32);
    }

    #[test]
    #[cfg_attr(not(aicf_avx512bf16), ignore = "needs a CPU with AVX-512 BF16 (vdpbf16ps); the build found none")]
    fn the_bf16_dot_gemm_matches_f64_sums_for_every_layout_and_edge() {
        matches_f64_sums(Kernel::Avx512Bf16);
    }

    #[test]
    #[cfg_attr(not(aicf_avx2), ignore = "needs a CPU with AVX2 and FMA; the build found none")]
    fn the_avx2_gemm_matches_f64_sums_for_every_layout_and_edge() {
        matches_f64_sums(Kernel::Avx2F32);
    }

    /// `rows_done` sees every row of C exactly once, complete, where the
    /// work splits by rows (a tall product, a batch over the threads, one
    /// thread); a wide product split by columns reports none and says so.
    #[test]
    #[cfg_attr(not(any(aicf_avx512f, aicf_avx2)), ignore = "needs a CPU with AVX-512 or AVX2; the build found neither")]
    fn completed_rows_are_handed_over_once_and_final() {
        for kernel in f32_kernels() {
            completed_rows_of(kernel);
        }
    }

    /// The f32 kernels this CPU has (at least one: the tests that call it
    /// are ignored elsewhere).
    fn f32_kernels() -> Vec<Kernel> {
        let kernels: Vec<Kernel> = [Kernel::Avx512F32, Kernel::Avx2F32].into_iter().filter(|k| k.available()).collect();
        assert!(!kernels.is_empty(), "the build saw the instructions but the CPU running the test lacks them");
        kernels
    }

    fn completed_rows_of(kernel: Kernel) {
        use std::sync::atomic::{AtomicUsize, Ordering};
        for (threads, batch, (m, n, k), split_by_rows) in [
            (2, 1, (100, 40, 600), true),
            (2, 3, (30, 70, 9), true),
            (1, 1, (20, 300, 5), true),
            (2, 1, (20, 300, 5), false),
        ] {
            let pool = Team::new(threads, || {}).unwrap();
            let g = describe(batch, (m, n, k), false, false, 1.0);
            let (a, b) = (values(batch * m * k, 3), values(batch * k * n, 4));
            let mut want = vec![0f32; batch * m * n];
            let mut c = vec![f32::NAN; batch * m * n];
            unsafe {
                gemm(
                    &pool,
                    threads,
                    &mut Packed::default(),
                    &g,
                    kernel,
                    a.as_ptr() as _,
                    b.as_ptr() as _,
                    want.as_mut_ptr(),
                    None,
                )
            };
            let seen: Vec<AtomicUsize> = (0..batch * m).map(|_| AtomicUsize::new(0)).collect();
            let out = Shared(c.as_mut_ptr());
            let check = |lo: usize, hi: usize| {
                for row in lo..hi {
                    seen[row].fetch_add(1, Ordering::Relaxed);
                    let got = unsafe { std::slice::from_raw_parts(out.get().add(row * n), n) };
                    assert_eq!(got, &want[row * n..(row + 1) * n], "row {row} handed over before it was complete");
                }
            };
            let all = unsafe {
                gemm(
                    &pool,
                    threads,
                    &mut Packed::default(),
                    &g,
                    kernel,
                    a.as_ptr() as _,
                    b.as_ptr() as _,
                    out.get(),
                    Some(&check),
                )
            };
            assert_eq!(all, split_by_rows, "{kernel:?}, {threads} threads, batch {batch}, {m}x{n}x{k}");
            let counts: Vec<usize> = seen.iter().map(|s| s.load(Ordering::Relaxed)).collect();
            let expected = if split_by_rows { 1 } else { 0 };
            assert!(counts.iter().all(|&c| c == expected), "{threads} threads, batch {batch}, {m}x{n}x{k}: {counts:?}");
            assert_eq!(c, want);
        }
    }

    /// k = 0: the product is zero (there is nothing to pack), not what the
    /// output held.
    #[test]
    #[cfg_attr(not(any(aicf_avx512f, aicf_avx2)), ignore = "needs a CPU with AVX-512 or AVX2; the build found neither")]
    fn an_empty_sum_is_zero() {
        for kernel in f32_kernels() {
            empty_sum_of(kernel);
        }
    }

    fn empty_sum_of(kernel: Kernel) {
        let pool = Team::new(2, || {}).unwrap();
        let g = describe(2, (3, 4, 0), false, false, 1.0);
        let mut c = vec![f32::NAN; 24];
        unsafe { gemm(&pool, 1, &mut Packed::default(), &g, kernel, [].as_ptr(), [].as_ptr(), c.as_mut_ptr(), None) };
        assert!(c.iter().all(|&v| v == 0.0), "{c:?}");
    }
}
