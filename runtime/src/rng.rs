//! Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2,
//! 3", SC'11): a counter-based generator. Output block `b` of stream `s`
//! under key `seed` is a pure function of `(seed, s, b)`, so any element of a
//! tensor can be generated independently, on any thread or device, and a
//! replayed step draws the same numbers.

const M0: u32 = 0xD251_1F53;
const M1: u32 = 0xCD9E_8D57;
const W0: u32 = 0x9E37_79B9;
const W1: u32 = 0xBB67_AE85;

fn mulhilo(a: u32, b: u32) -> (u32, u32) {
    let p = u64::from(a) * u64::from(b);
    ((p >> 32) as u32, p as u32)
}

/// The Philox4x32 bijection with 10 rounds.
pub fn philox4x32_10(counter: [u32; 4], key: [u32; 2]) -> [u32; 4] {
    let (mut c, mut k) = (counter, key);
    for round in 0..10 {
        if round > 0 {
            k = [k[0].wrapping_add(W0), k[1].wrapping_add(W1)];
        }
        let (hi0, lo0) = mulhilo(M0, c[0]);
        let (hi1, lo1) = mulhilo(M1, c[2]);
        c = [hi1 ^ c[1] ^ k[0], lo1, hi0 ^ c[3] ^ k[1], lo0];
    }
    c
}

/// Four 32-bit words: block `block` of stream `stream` under `seed`.
pub fn block(seed: u64, stream: u64, block: u64) -> [u32; 4] {
    philox4x32_10(
        [block as u32, (block >> 32) as u32, stream as u32, (stream >> 32) as u32],
        [seed as u32, (seed >> 32) as u32],
    )
}

/// Blocks a random op (`hl.dropout`, `hl.random_like`) draws per step
/// before its counter would reach the next step's (`offset` advances by
/// this much a step).
pub const STEP_BLOCKS: u64 = 1 << 24;

/// The words a random op draws for its block `g` at `offset`: block
/// `offset + g mod 2^24` of stream `stream`, with `g / 2^24` xored into
/// the stream's high word, so that an op of more than 2^26 elements does
/// not draw the next step's numbers (streams stay below 2^32; below 2^24
/// blocks it is `block(seed, stream, offset + g)`).
pub fn op_block(seed: u64, stream: u64, offset: u64, g: u64) -> [u32; 4] {
    let c = offset.wrapping_add(g % STEP_BLOCKS);
    let hi = ((stream >> 32) as u32) ^ ((g / STEP_BLOCKS) as u32);
    philox4x32_10([c as u32, (c >> 32) as u32, stream as u32, hi], [seed as u32, (seed >> 32) as u32])
}

/// The bits of a word a uniform draw of `hl.random_like` takes: the
/// stored type's significand (24 for f32 and f64, 11 for f16, 8 for
/// bf16), so that its largest draw, `1 - 2^-bits`, rounds to no 1.
pub fn uniform_bits(bf16: bool, f16: bool) -> u32 {
    if bf16 {
        8
    } else if f16 {
        11
    } else {
        24
    }
}

/// A uniform float in [0, 1) from the top `bits` bits of `x`.
pub fn unit_bits(x: u32, bits: u32) -> f64 {
    f64::from(x >> (32 - bits)) / (1u64 << bits) as f64
}

/// A uniform float in [0, 1) from the top 24 bits of `x`.
pub fn unit_f32(x: u32) -> f32 {
    (x >> 8) as f32 * (1.0 / 16_777_216.0)
}

/// A uniform float in (0, 1], safe for `ln`.
pub fn unit_open_f32(x: u32) -> f32 {
    ((x >> 8) + 1) as f32 * (1.0 / 16_777_216.0)
}

/// Standard normal `j` (0 to 3) of a block's words `w`: Box-Muller on the
/// pair `j / 2`, the cosine for even `j` and the sine for odd, as
/// `hl.random_like` and the normal initializers draw them.
pub fn normal(w: [u32; 4], j: usize) -> f64 {
    let p = (j / 2) % 2;
    let r = (-2.0 * f64::from(unit_open_f32(w[2 * p])).ln()).sqrt();
    let theta = std::f64::consts::TAU * f64::from(unit_f32(w[2 * p + 1]));
    if j % 2 == 0 { r * theta.cos() } else { r * theta.sin() }
}

#[cfg(test)]
mod tests {
    use super::*;

    // An op's block is the plain block below 2^24 blocks, and past it
    // not the next step's.
    #[test]
    fn an_ops_blocks_past_a_steps_share_are_not_the_next_steps() {
        assert_eq!(op_block(7, 3, 5 << 24, 1000), block(7, 3, (5 << 24) + 1000));
        assert_ne!(op_block(7, 3, 5 << 24, STEP_BLOCKS + 1000), op_block(7, 3, 6 << 24, 1000));
    }

    // Known-answer vectors of Random123's kat_vectors for philox4x32 with 10 rounds.
    #[test]
    fn matches_known_answers() {
        assert_eq!(philox4x32_10([0; 4], [0; 2]), [0x6627_e8d5, 0xe169_c58d, 0xbc57_ac4c, 0x9b00_dbd8]);
        assert_eq!(philox4x32_10([u32::MAX; 4], [u32::MAX; 2]), [0x408f_276d, 0x41c8_3b0e, 0xa20b_c7c6, 0x6d54_51fd]);
        assert_eq!(
            philox4x32_10([0x243f_6a88, 0x85a3_08d3, 0x1319_8a2e, 0x0370_7344], [0xa409_3822, 0x299f_31d0]),
            [0xd16c_fe09, 0x94fd_cceb, 0x5001_e420, 0x2412_6ea1]
        );
    }

    #[test]
    fn unit_ranges() {
        assert_eq!(unit_f32(0), 0.0);
        assert!(unit_f32(u32::MAX) < 1.0);
        assert!(unit_open_f32(0) > 0.0);
        assert_eq!(unit_open_f32(u32::MAX), 1.0);
    }
}
