use crate::codegen::prelude::*;

impl Generator {
    /// An elementwise kernel: rows of the output's innermost dims
    /// ([`rows_of`]: its last dim, merged with more, and on the CPU spanning
    /// further dims where rows are short); inputs broadcast NumPy-style.
    /// Returns (rows, operations per row).
    ///
    /// An output updated in place (`alias[m]`, the input it overwrites) is
    /// stored through that input's pointer, so LLVM sees one buffer read and
    /// written at the same index and vectorises the loop; through two
    /// pointers its run-time overlap check fails and the scalar loop runs.
    /// `noalias`: the buffers are apart ([`Generator::apart`]).
    pub(crate) fn elementwise(
        &mut self,
        ins: &[(Vec<usize>, DType)],
        outs: &[(Vec<usize>, DType)],
        body: &(String, Vec<DType>, Vec<DType>),
        alias: &[Option<usize>],
        noalias: bool,
    ) -> (u64, u64) {
        let Rows { shape, aligned: aligned_ins, row_dims } = rows_of(
            &outs.first().map(|o| o.0.clone()).unwrap_or_default(),
            &ins.iter().map(|i| i.0.clone()).collect::<Vec<_>>(),
            self.target.long_rows(),
        );
        let rank = shape.len();
        // The dims before the row's.
        let outer = rank.saturating_sub(row_dims);
        let cols = shape[outer..].iter().product::<usize>().max(1);
        let rows = (numel(&shape) / cols).max(1);
        let mut k = Kernel::new();
        // A work item is an element on the GPU (consecutive threads touch
        // consecutive addresses), a row on the CPU (its columns run in the
        // inner loop).
        let (i, element) = self.target.elementwise_item(&mut k, cols);
        // Per input: the offset of its row, and how it runs along the row.
        let mut bases = Vec::new();
        for aligned in &aligned_ins {
            let along = if cols > 1 && aligned[outer..] == shape[outer..] {
                Along::Whole
            } else if aligned[outer..].iter().all(|&d| d == 1) {
                Along::Broadcast
            } else {
                Along::Coordinates
            };
            let extent: usize = aligned[outer..].iter().product();
            let base = if outer == 0 || aligned[..outer].iter().all(|&d| d == 1) {
                "%c0".to_string()
            } else if aligned[..outer] == shape[..outer] {
                let c = k.index(extent);
                k.mul(&i, &c)
            } else {
                // Unravel the row over the outer dimensions.
                offset(&mut k, &i, &shape, aligned, 0..outer)
            };
            bases.push((base, along));
        }
        let cols_c = k.index(cols);
        let (j, out_idx) = match &element {
            Some(e) => {
                let row_start = k.mul(&i, &cols_c);
                let j = k.val(&format!("arith.subi {e}, {row_start} : index"));
                (j, e.clone())
            }
            None => {
                let row_out = k.mul(&i, &cols_c);
                let j = k.open("%c0", &cols_c);
                let out_idx = k.add(&row_out, &j);
                (j, out_idx)
            }
        };
        let (fname, in_t, out_t) = body;
        // Loads give the compute type (a 16-bit float widened to f32), which
        // is the body's too (`widen_body`); stores round back.
        let mut values = Vec::new();
        for (n, (((s, t), (base, along)), aligned)) in ins.iter().zip(&bases).zip(&aligned_ins).enumerate() {
            let idx = match along {
                Along::Whole => k.add(base, &j),
                Along::Broadcast => base.clone(),
                Along::Coordinates => {
                    // The column's coordinates in the row's dims (constant
                    // divisors: LLVM multiplies, and vectorises the loop).
                    let within = offset(&mut k, &j, &shape, aligned, outer..rank);
                    k.add(base, &within)
                }
            };
            values.push(k.load(&format!("%b{n}"), &idx, &flat_type(s, *t)));
        }
        let sig = |ts: &[DType]| ts.iter().map(|t| t.mlir()).collect::<Vec<_>>().join(", ");
        k.n += 1;
        let r = format!("%y{}", k.n);
        let results = if out_t.len() == 1 { r.clone() } else { format!("{r}:{}", out_t.len()) };
        k.line(&format!("{results} = func.call @{fname}({}) : ({}) -> ({})", values.join(", "), sig(in_t), sig(out_t)));
        for (m, (s, t)) in outs.iter().enumerate() {
            let v = if out_t.len() == 1 { r.clone() } else { format!("{r}#{m}") };
            let target = alias.get(m).copied().flatten().unwrap_or(ins.len() + m);
            k.store(&v, &format!("%b{target}"), &out_idx, &flat_type(s, *t));
        }
        k.close();
        let mut specs = ins.to_vec();
        specs.extend(outs.iter().cloned());
        if element.is_some() {
            self.finish_noalias(k, &specs, noalias);
            return ((rows * cols) as u64, (ins.len() + outs.len() + 4) as u64);
        }
        k.close();
        self.finish_noalias(k, &specs, noalias);
        (rows as u64, (cols * (ins.len() + outs.len() + 4)) as u64)
    }
}

/// The offset in an input of `aligned` shape of flat index `idx` over the
/// iteration dims `dims` of `shape`: `idx` unravelled over them, each
/// coordinate times the input's stride, the dims it broadcasts along
/// (size 1) left out.
fn offset(k: &mut Kernel, idx: &str, shape: &[usize], aligned: &[usize], dims: std::ops::Range<usize>) -> String {
    let strides = row_major_strides(aligned);
    let coords = k.unravel(idx, &shape[dims.clone()]);
    let mut acc = "%c0".to_string();
    for (c, d) in coords.iter().zip(dims).filter(|&(_, d)| aligned[d] != 1) {
        acc = k.mad(c, strides[d], &acc);
    }
    acc
}

/// How an input runs along an elementwise kernel's row.
enum Along {
    /// Over every dim of the row: contiguous, at the column.
    Whole,
    /// Over none: one value a row.
    Broadcast,
    /// Over some of the row's dims: indexed by the column's coordinates.
    Coordinates,
}

/// The least elements of a row worth merging further dims into.
const ROW: usize = 256;

/// The fewest rows a merge may leave: rows are what the threads split, and
/// a `[1024, 200]` tensor merged whole would be one row on one thread.
const MIN_ROWS: usize = 64;

/// Rows shorter than this take further dims where the target asks
/// ([`Rows::row_dims`]): a vector loop over fewer columns never runs.
const SHORT_ROW: usize = 64;

/// The iteration of an elementwise kernel.
#[derive(Debug, PartialEq)]
struct Rows {
    /// The iteration shape, the output's with dims merged (and split).
    shape: Vec<usize>,
    /// Each input's shape, aligned to `shape` (1 where it broadcasts).
    aligned: Vec<Vec<usize>>,
    /// How many trailing dims of `shape` one row spans (its columns are
    /// their elements, row-major): 1, or more for a short row that took
    /// further dims (that some input broadcasts along, or that the merge
    /// left apart to keep enough rows).
    row_dims: usize,
}

/// The iteration of an elementwise kernel writing `out` from inputs of
/// `ins` (broadcast to it).
///
/// The innermost dims merge into one row where every input broadcasts
/// both alike (both size 1, or both whole), until a row holds [`ROW`]
/// elements (leaving at least [`MIN_ROWS`] rows). A `[16, 144, 8, 8]`
/// batch-norm scale by `[1, 144, 1, 1]` runs rows of 64 (with the
/// channel's scale once a row) rather than of 8: EfficientNet's elementwise
/// kernels took 41% of its CPU step in rows of 8 or 16.
///
/// With `long_rows` (the CPU), a row still shorter than [`SHORT_ROW`]
/// then spans further dims that inputs broadcast along differently (those
/// are indexed by the column's coordinates), a dim split where taking it
/// whole would leave fewer than [`MIN_ROWS`] rows: the same scale over
/// `[16, 672, 2, 2]` runs 64 rows of `[168, 4]` where 10,752 rows of 4 ran
/// scalar code at 5x the time.
fn rows_of(out: &[usize], ins: &[Vec<usize>], long_rows: bool) -> Rows {
    let mut shape = out.to_vec();
    let rank = shape.len();
    let mut aligned: Vec<Vec<usize>> = ins
        .iter()
        .map(|s| {
            let mut a = vec![1; rank.saturating_sub(s.len())];
            a.extend(s);
            a
        })
        .collect();
    while shape.len() >= 2 && *shape.last().unwrap_or(&0) < ROW {
        let d = shape.len() - 2;
        let alike =
            aligned.iter().all(|a| (a[d] == 1 && a[d + 1] == 1) || (a[d] == shape[d] && a[d + 1] == shape[d + 1]));
        let rows: usize = shape[..d].iter().product();
        if !alike || rows < MIN_ROWS {
            break;
        }
        shape[d] *= shape[d + 1];
        shape.pop();
        for a in &mut aligned {
            a[d] *= a[d + 1];
            a.pop();
        }
    }
    let mut row_dims = 1;
    while long_rows && row_dims < shape.len() && !shape.contains(&0) {
        let outer = shape.len() - row_dims;
        let cols: usize = shape[outer..].iter().product();
        if cols >= SHORT_ROW {
            break;
        }
        let d = outer - 1;
        let rows: usize = shape[..d].iter().product();
        // The dim's outer factor: the least divisor leaving MIN_ROWS rows
        // (1: it joins the row whole).
        let need = MIN_ROWS.div_ceil(rows.max(1));
        let split = if need <= 1 {
            1
        } else {
            // None: no factor leaves enough rows.
            let Some(f) = (need..shape[d]).find(|&f| shape[d].is_multiple_of(f)) else { break };
            f
        };
        if split > 1 {
            let (hi, lo) = (split, shape[d] / split);
            shape.splice(d..=d, [hi, lo]);
            for a in &mut aligned {
                let parts = if a[d] == 1 { [1, 1] } else { [hi, lo] };
                a.splice(d..=d, parts);
            }
        }
        row_dims += 1;
    }
    Rows { shape, aligned, row_dims }
}

#[cfg(test)]
mod tests {
    use super::{Rows, rows_of};

    #[test]
    fn rows_merge_inner_dims_every_input_broadcasts_alike() {
        let rows = |out: &[usize], ins: &[Vec<usize>]| {
            let r = rows_of(out, ins, false);
            assert_eq!(r.row_dims, 1);
            (r.shape, r.aligned)
        };
        // A batch norm's per-channel scale: H x W merge, the channel stays.
        let (shape, ins) = rows(&[16, 144, 8, 8], &[vec![16, 144, 8, 8], vec![1, 144, 1, 1]]);
        assert_eq!((shape, ins), (vec![16, 144, 64], vec![vec![16, 144, 64], vec![1, 144, 1]]));
        // Same shapes merge until a row holds 256.
        assert_eq!(rows(&[16, 64, 16, 16], &[vec![16, 64, 16, 16]]).0, vec![16, 64, 256]);
        // A bias along the row: nothing merges.
        assert_eq!(rows(&[32, 128], &[vec![128]]).0, vec![32, 128]);
        // At least 64 rows are left for the threads to split.
        assert_eq!(rows(&[1024, 200], &[vec![1024, 200]]).0, vec![1024, 200]);
        // A conv weight's Adam update: 512 rows of 4608, not 262,144 of 9.
        assert_eq!(rows(&[512, 512, 3, 3], &[vec![512, 512, 3, 3]]).0, vec![512, 4608]);
        // Scalars and rank 1 stay.
        assert_eq!(rows(&[7], &[vec![]]).0, vec![7]);
    }

    #[test]
    fn short_rows_take_further_dims_on_the_cpu() {
        // A batch norm over 2 x 2 images: 16 x 672 rows of 4 became 64 rows
        // of [168, 4] (the channel split 4 x 168 so that 64 rows are left).
        let r = rows_of(&[16, 672, 2, 2], &[vec![16, 672, 2, 2], vec![1, 672, 1, 1]], true);
        assert_eq!(
            r,
            Rows { shape: vec![16, 4, 168, 4], aligned: vec![vec![16, 4, 168, 4], vec![1, 4, 168, 1]], row_dims: 2 }
        );
        // Enough rows: the channel joins whole.
        let r = rows_of(&[128, 32, 2, 2], &[vec![128, 32, 2, 2], vec![1, 32, 1, 1]], true);
        assert_eq!((r.shape, r.row_dims), (vec![128, 32, 4], 2));
        // Rows of 64 already: nothing more.
        let r = rows_of(&[16, 144, 8, 8], &[vec![16, 144, 8, 8], vec![1, 144, 1, 1]], true);
        assert_eq!((r.shape, r.row_dims), (vec![16, 144, 64], 1));
        // A prime channel count has no factor to split: rows of 4 stay.
        let r = rows_of(&[16, 7, 2, 2], &[vec![16, 7, 2, 2], vec![1, 7, 1, 1]], true);
        assert_eq!((r.shape, r.row_dims), (vec![16, 7, 4], 1));
        // An SE block's per-image, per-channel scale: the channel joins
        // (split), indexed by its coordinate; the image stays outside.
        let r = rows_of(&[16, 96, 2, 2], &[vec![16, 96, 2, 2], vec![16, 96, 1, 1]], true);
        assert_eq!((r.shape.clone(), r.row_dims), (vec![16, 4, 24, 4], 2));
        assert_eq!(r.aligned[1], vec![16, 4, 24, 1]);
        // Empty tensors and scalars stay.
        assert_eq!(rows_of(&[0, 3, 2], &[vec![0, 3, 2], vec![3, 1]], true).row_dims, 1);
        assert_eq!(rows_of(&[], &[vec![]], true).row_dims, 1);
    }
}
