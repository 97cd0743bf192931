//! `torch.einsum` (and ONNX's `Einsum`) as `hl` ops: each pair of operands
//! is one batched matrix product (`hl.matmul`) between transposes and
//! reshapes, letters no later operand or the output needs summed away first
//! (`hl.reduce_sum`), or a broadcast product (`hl.mul`) where the pair sums
//! over no letter; the result transposed to the output's order. So an
//! attention's `bhqd,bhkd->bhqk` is the GEMM it would be written as, and
//! its gradient is the matmul's.
//!
//! Supported: explicit (`->`) and implicit outputs, `...` (the same number
//! of axes in every operand that has it), any number of operands. Refused
//! with the reason: a letter twice in one operand (a diagonal or trace),
//! an axis of one size in one operand and another in the next (no
//! broadcasting of 1), an output letter no operand has.

use super::{NnError, Tensor};
use std::collections::BTreeMap;

type R<T> = std::result::Result<T, String>;

/// An operand's axes by letter (`...`'s axes as letters past `z`).
type Term = Vec<char>;

/// The first of the letters that stand for `...`'s axes (none of them an
/// ASCII letter an equation may use).
const ELLIPSIS: u32 = 0x100;

/// `equation`'s operand terms and output term for operands of `ranks`.
fn parse(equation: &str, ranks: &[usize]) -> R<(Vec<Term>, Term)> {
    let text: String = equation.chars().filter(|c| !c.is_whitespace()).collect();
    let (lhs, rhs) = match text.split_once("->") {
        Some((l, r)) => (l, Some(r)),
        None => (text.as_str(), None),
    };
    let sides: Vec<&str> = lhs.split(',').collect();
    if sides.len() != ranks.len() {
        return Err(format!("the equation '{equation}' names {} operands; the node has {}", sides.len(), ranks.len()));
    }
    // Letters of one term, with where its `...` is and how many letters.
    let letters = |term: &str| -> R<(Vec<char>, Option<usize>)> {
        let (before, after) = match term.split_once("...") {
            Some((b, a)) => (b, Some(a)),
            None => (term, None),
        };
        let mut out = Vec::new();
        for part in std::iter::once(before).chain(after) {
            if let Some(c) = part.chars().find(|c| !c.is_ascii_alphabetic()) {
                return Err(format!("the equation '{equation}' has '{c}' in a term; terms are letters and '...'"));
            }
        }
        out.extend(before.chars());
        let at = after.map(|_| before.chars().count());
        out.extend(after.into_iter().flat_map(str::chars));
        Ok((out, at))
    };
    let mut ellipsis_rank = None;
    let mut parsed = Vec::new();
    for (k, (side, &rank)) in sides.iter().zip(ranks).enumerate() {
        let (named, at) = letters(side)?;
        let spread = match at {
            Some(_) if named.len() <= rank => rank - named.len(),
            None if named.len() == rank => 0,
            _ => {
                return Err(format!(
                    "operand {k} has rank {rank}, and the equation's term '{side}' names {} of its axes",
                    named.len()
                ));
            }
        };
        if let Some(at) = at {
            match ellipsis_rank {
                Some(r) if r != spread => {
                    return Err(format!(
                        "'...' stands for {r} axes in one operand and {spread} in operand {k}: broadcasting them is \
                         not supported"
                    ));
                }
                _ => ellipsis_rank = Some(spread),
            }
            let mut term = named[..at].to_vec();
            term.extend((0..spread as u32).map(|i| char::from_u32(ELLIPSIS + i).unwrap_or('\u{100}')));
            term.extend_from_slice(&named[at..]);
            parsed.push(term);
        } else {
            parsed.push(named);
        }
    }
    for (k, term) in parsed.iter().enumerate() {
        if let Some(c) = term.iter().enumerate().find(|(i, c)| term[..*i].contains(c)).map(|(_, c)| c) {
            return Err(format!(
                "operand {k}'s term repeats '{c}' (a diagonal or trace): not supported; take it with a Gather or a \
                 mask first"
            ));
        }
    }
    let spread: Vec<char> =
        (0..ellipsis_rank.unwrap_or(0) as u32).map(|i| char::from_u32(ELLIPSIS + i).unwrap_or('\u{100}')).collect();
    let output = match rhs {
        Some(r) => {
            let (named, at) = letters(r)?;
            let mut term = named.clone();
            if let Some(at) = at {
                term = named[..at].to_vec();
                term.extend_from_slice(&spread);
                term.extend_from_slice(&named[at..]);
            }
            term
        }
        // Implicit: `...`'s axes, then the letters used once, sorted.
        None => {
            let mut counts: BTreeMap<char, usize> = BTreeMap::new();
            for c in parsed.iter().flatten().filter(|c| c.is_ascii_alphabetic()) {
                *counts.entry(*c).or_default() += 1;
            }
            spread.iter().copied().chain(counts.into_iter().filter(|(_, n)| *n == 1).map(|(c, _)| c)).collect()
        }
    };
    if let Some(c) = output.iter().find(|c| !parsed.iter().flatten().any(|x| x == *c)) {
        return Err(format!("the equation '{equation}''s output has '{c}', which no operand has"));
    }
    if let Some(c) = output.iter().enumerate().find(|(i, c)| output[..*i].contains(c)).map(|(_, c)| c) {
        return Err(format!("the equation '{equation}''s output repeats '{c}'"));
    }
    Ok((parsed, output))
}

fn shown(c: char) -> String {
    if c.is_ascii_alphabetic() { c.to_string() } else { format!("...#{}", c as u32 - ELLIPSIS) }
}

/// `x` (axes `term`) with the axes whose letters `keep` lacks summed away.
fn sum_unneeded(x: Tensor, term: &Term, keep: &dyn Fn(char) -> bool) -> R<(Tensor, Term)> {
    let axes: Vec<i64> = (0..term.len()).filter(|&i| !keep(term[i])).map(|i| i as i64).collect();
    if axes.is_empty() {
        return Ok((x, term.clone()));
    }
    let kept: Term = term.iter().copied().filter(|&c| keep(c)).collect();
    let y = x.sum(&axes, false).map_err(|e| e.to_string())?;
    Ok((y, kept))
}

/// `x` (axes `term`) transposed to `order` (a permutation of `term`).
fn permuted(x: &Tensor, term: &Term, order: &Term) -> R<Tensor> {
    if term == order {
        return Ok(x.clone());
    }
    let perm: Vec<i64> = order.iter().map(|c| term.iter().position(|t| t == c).unwrap_or(0) as i64).collect();
    x.permute(&perm).map_err(|e| e.to_string())
}

/// The product of `a` and `b` over their shared letters that `needed`
/// (the output's, or a later operand's) lacks; the shared ones it has are
/// batch axes, the others the rows and columns.
fn contract(a: (Tensor, Term), b: (Tensor, Term), needed: &dyn Fn(char) -> bool) -> R<(Tensor, Term)> {
    let (ta, tb) = (a.1.clone(), b.1.clone());
    let (a, ta) = sum_unneeded(a.0, &ta, &|c| needed(c) || tb.contains(&c))?;
    let (b, tb) = sum_unneeded(b.0, &tb, &|c| needed(c) || ta.contains(&c))?;
    let batch: Term = ta.iter().copied().filter(|c| tb.contains(c) && needed(*c)).collect();
    let summed: Term = ta.iter().copied().filter(|c| tb.contains(c) && !needed(*c)).collect();
    let rows: Term = ta.iter().copied().filter(|c| !tb.contains(c)).collect();
    let cols: Term = tb.iter().copied().filter(|c| !ta.contains(c)).collect();
    let size = |x: &Tensor, t: &Term, c: char| x.shape()[t.iter().position(|&l| l == c).unwrap_or(0)];
    for &c in batch.iter().chain(&summed) {
        let (m, n) = (size(&a, &ta, c), size(&b, &tb, c));
        if m != n {
            return Err(format!("'{}' is an axis of {m} in one operand and of {n} in another", shown(c)));
        }
    }
    let product = |x: &Tensor, t: &Term, letters: &Term| letters.iter().map(|&c| size(x, t, c)).product::<usize>();
    let (nb, m, k, n) =
        (product(&a, &ta, &batch), product(&a, &ta, &rows), product(&a, &ta, &summed), product(&b, &tb, &cols));
    let nn = |r: crate::nn::Result<Tensor>| r.map_err(|e| e.to_string());
    let order_a: Term = batch.iter().chain(&rows).chain(&summed).copied().collect();
    let order_b: Term = batch.iter().chain(&summed).chain(&cols).copied().collect();
    let (lhs, rhs) = (permuted(&a, &ta, &order_a)?, permuted(&b, &tb, &order_b)?);
    let dims = |v: &[usize]| v.iter().map(|&d| d as i64).collect::<Vec<i64>>();
    let y = if summed.is_empty() {
        // Nothing summed (`ij,ij->ij`, a rotary table's `bhld,ld->bhld`):
        // a broadcast product, not matrix products of one column.
        let l = nn(lhs.reshape(&dims(&[nb, m, 1])))?;
        let r = nn(rhs.reshape(&dims(&[nb, 1, n])))?;
        nn(l.mul(&r))?
    } else if batch.is_empty() {
        let l = nn(lhs.reshape(&dims(&[m, k])))?;
        let r = nn(rhs.reshape(&dims(&[k, n])))?;
        nn(l.matmul(&r))?
    } else {
        let l = nn(lhs.reshape(&dims(&[nb, m, k])))?;
        let r = nn(rhs.reshape(&dims(&[nb, k, n])))?;
        nn(l.matmul(&r))?
    };
    let term: Term = batch.iter().chain(&rows).chain(&cols).copied().collect();
    let shape: Vec<usize> =
        batch.iter().chain(&rows).map(|&c| size(&a, &ta, c)).chain(cols.iter().map(|&c| size(&b, &tb, c))).collect();
    Ok((nn(y.reshape(&dims(&shape)))?, term))
}

impl Tensor {
    /// `torch.einsum(equation, *operands)`: explicit (`ij,jk->ik`) and
    /// implicit (`ij,jk`) outputs, `...`, any number of operands. A letter
    /// twice in one operand (a diagonal or trace) and a size-1 axis
    /// broadcast against another size are refused.
    pub fn einsum(equation: &str, operands: &[&Tensor]) -> super::Result<Tensor> {
        einsum(equation, operands.iter().map(|&t| t.clone()).collect())
            .map_err(|message| NnError::Invalid { layer: None, message: format!("einsum '{equation}': {message}") })
    }
}

fn einsum(equation: &str, operands: Vec<Tensor>) -> R<Tensor> {
    let ranks: Vec<usize> = operands.iter().map(Tensor::rank).collect();
    let (terms, output) = parse(equation, &ranks)?;
    let mut rest: Vec<(Tensor, Term)> = operands.into_iter().zip(terms).collect();
    rest.reverse();
    let Some(mut acc) = rest.pop() else { return Err("Einsum of no operands".into()) };
    while let Some(next) = rest.pop() {
        let needed = |c: char| output.contains(&c) || rest.iter().any(|(_, t)| t.contains(&c));
        acc = contract(acc, next, &needed)?;
    }
    let (y, term) = sum_unneeded(acc.0, &acc.1, &|c| output.contains(&c))?;
    permuted(&y, &term, &output)
}

#[cfg(test)]
mod tests {
    use super::parse;

    #[test]
    fn terms_expand_ellipses_and_implicit_outputs() {
        let (t, o) = parse("bhqd,bhkd->bhqk", &[4, 4]).expect("attention scores");
        assert_eq!((t[0].iter().collect::<String>(), o.iter().collect::<String>()), ("bhqd".into(), "bhqk".into()));
        let e = parse("...ij,...jk", &[4, 3]).expect_err("ranks 4 and 3: 2 and 1 axes for '...'");
        assert!(e.contains("broadcasting them is not supported"), "{e}");
        let (t, o) = parse("...ij,...jk", &[3, 3]).expect("batched matmul");
        assert_eq!(t[0].len(), 3);
        assert_eq!(o.len(), 3);
        assert_eq!(o[1..].iter().collect::<String>(), "ik");
        let (_, o) = parse("ij,jk", &[2, 2]).expect("implicit");
        assert_eq!(o.iter().collect::<String>(), "ik");
    }

    #[test]
    fn mistakes_are_named() {
        assert!(parse("ii->i", &[2]).expect_err("diagonal").contains("repeats 'i'"));
        assert!(parse("ij,jk->il", &[2, 2]).expect_err("output letter").contains("'l'"));
        assert!(parse("ij->ji", &[3]).expect_err("rank").contains("rank 3"));
        assert!(parse("ij,jk->ik", &[2]).expect_err("count").contains("names 2 operands"));
        assert!(parse("i1->i", &[2]).expect_err("digit").contains("'1'"));
    }
}
