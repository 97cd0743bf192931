use crate::codegen::prelude::*;

impl Generator {
    /// An elementwise kernel: rows of the outputs' last dimension; inputs
    /// broadcast NumPy-style. Returns (rows, operations per row).
    ///
    /// An output updated in place (`alias[m]`, the input it overwrites) is
    /// stored through that input's pointer, so LLVM sees one buffer read and
    /// written at the same index and vectorises the loop; through two
    /// pointers its run-time overlap check fails and the scalar loop runs.
    pub(crate) fn elementwise(
        &mut self,
        ins: &[(Vec<usize>, DType)],
        outs: &[(Vec<usize>, DType)],
        body: &(String, Vec<DType>, Vec<DType>),
        alias: &[Option<usize>],
    ) -> (u64, u64) {
        let (shape, aligned_ins) = rows_of(
            &outs.first().map(|o| o.0.clone()).unwrap_or_default(),
            &ins.iter().map(|i| i.0.clone()).collect::<Vec<_>>(),
        );
        let rank = shape.len();
        let cols = shape.last().copied().unwrap_or(1).max(1);
        let rows = (numel(&shape) / cols).max(1);
        let mut k = Kernel::new();
        // A work item is an element on the GPU (consecutive threads touch
        // consecutive addresses), a row on the CPU (its columns run in the
        // inner loop).
        let (i, element) = self.target.elementwise_item(&mut k, cols);
        // Per input: the offset of its row, and whether it runs along the row.
        let mut bases = Vec::new();
        for aligned in &aligned_ins {
            let along = aligned.last().copied().unwrap_or(1) == cols && cols > 1;
            let outer_same = rank > 0 && aligned[..rank - 1] == shape[..rank - 1];
            let base = if rank <= 1 || aligned[..rank - 1].iter().all(|&d| d == 1) {
                "%c0".to_string()
            } else if outer_same {
                let c = k.index(aligned[rank - 1]);
                k.mul(&i, &c)
            } else {
                // Unravel the row over the outer dimensions.
                let strides = row_major_strides(aligned);
                let mut rem = i.clone();
                let mut acc = "%c0".to_string();
                for d in (0..rank - 1).rev() {
                    let n = k.index(shape[d]);
                    let coord = k.val(&format!("arith.remui {rem}, {n} : index"));
                    rem = k.val(&format!("arith.divui {rem}, {n} : index"));
                    if aligned[d] != 1 {
                        acc = k.mad(&coord, strides[d], &acc);
                    }
                }
                acc
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
        for (n, ((s, t), (base, along))) in ins.iter().zip(&bases).enumerate() {
            let idx = if *along { k.add(base, &j) } else { base.clone() };
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
            self.finish(k, &specs);
            return ((rows * cols) as u64, (ins.len() + outs.len() + 4) as u64);
        }
        k.close();
        self.finish(k, &specs);
        (rows as u64, (cols * (ins.len() + outs.len() + 4)) as u64)
    }
}

/// The least elements of a row worth merging further dims into.
const ROW: usize = 256;

/// The fewest rows a merge may leave: rows are what the threads split, and
/// a `[1024, 200]` tensor merged whole would be one row on one thread.
const MIN_ROWS: usize = 64;

/// The iteration shape of an elementwise kernel writing `out` from inputs
/// of `ins` (broadcast to it): the innermost dims merged into one row where
/// every input broadcasts both alike (both size 1, or both whole), until a
/// row holds [`ROW`] elements (leaving at least [`MIN_ROWS`] rows); and
/// each input's shape, aligned to it. A
/// `[16, 144, 8, 8]` batch-norm scale by `[1, 144, 1, 1]` runs rows of 64
/// (with the channel's scale once a row) rather than of 8: EfficientNet's
/// elementwise kernels took 41% of its CPU step in rows of 8 or 16.
fn rows_of(out: &[usize], ins: &[Vec<usize>]) -> (Vec<usize>, Vec<Vec<usize>>) {
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
    (shape, aligned)
}

#[cfg(test)]
mod tests {
    use super::rows_of;

    #[test]
    fn rows_merge_inner_dims_every_input_broadcasts_alike() {
        // A batch norm's per-channel scale: H x W merge, the channel stays.
        let (shape, ins) = rows_of(&[16, 144, 8, 8], &[vec![16, 144, 8, 8], vec![1, 144, 1, 1]]);
        assert_eq!((shape, ins), (vec![16, 144, 64], vec![vec![16, 144, 64], vec![1, 144, 1]]));
        // Same shapes merge until a row holds 256.
        assert_eq!(rows_of(&[16, 64, 16, 16], &[vec![16, 64, 16, 16]]).0, vec![16, 64, 256]);
        // A bias along the row: nothing merges.
        assert_eq!(rows_of(&[32, 128], &[vec![128]]).0, vec![32, 128]);
        // At least 64 rows are left for the threads to split.
        assert_eq!(rows_of(&[1024, 200], &[vec![1024, 200]]).0, vec![1024, 200]);
        // A conv weight's Adam update: 512 rows of 4608, not 262,144 of 9.
        assert_eq!(rows_of(&[512, 512, 3, 3], &[vec![512, 512, 3, 3]]).0, vec![512, 4608]);
        // Scalars and rank 1 stay.
        assert_eq!(rows_of(&[7], &[vec![]]).0, vec![7]);
    }
}
