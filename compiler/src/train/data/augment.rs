//! Random augmentation of training images (`aicf train --augment
//! flip,crop=4`), as torchvision's `RandomHorizontalFlip()` and
//! `RandomCrop(size, padding=4)` (zeros padded) applied to each training
//! example of each step: the CIFAR recipe. Held-out examples are not
//! augmented.
//!
//! Each example's draw is a function of the run's seed, the step and the
//! example's row, not of a generator's state: a resumed run, and a
//! data-parallel one (each micro-batch's seed as its dropout's), draw what
//! the uninterrupted run drew.

use super::images::{Form, Layout};

/// What `--augment` asks for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Augment {
    /// Flip each image left to right with probability 1/2.
    pub flip: bool,
    /// Pad each side by this many zeros, then crop the image's size at a
    /// random offset (0: none).
    pub crop: usize,
}

/// The most padding `crop=` takes (a crop that moves an image by more than
/// this is no longer the same image at these sizes).
const MOST_CROP: usize = 1024;

impl Augment {
    /// Reads `flip`, `crop=P`, both (`flip,crop=4`) or `none`.
    pub fn parse(text: &str) -> Result<Augment, String> {
        let mut a = Augment::default();
        for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            match part.split_once('=') {
                None if part == "flip" => a.flip = true,
                None if part == "none" => {}
                Some(("crop", p)) => {
                    a.crop = p.trim().parse::<usize>().ok().filter(|&p| p <= MOST_CROP).ok_or_else(|| {
                        format!("crop={p}: the padding is a whole number of pixels, 0 to {MOST_CROP}")
                    })?;
                }
                None if part == "crop" => {
                    return Err("crop needs its padding, crop=P (pixels padded on each side, as RandomCrop's \
                                padding=P; CIFAR's is 4)"
                        .into());
                }
                _ => return Err(format!("'{part}': --augment takes flip, crop=P, both (flip,crop=4) or none")),
            }
        }
        Ok(a)
    }

    pub fn is_none(&self) -> bool {
        !self.flip && self.crop == 0
    }

    /// As [`Augment::parse`] reads it (`none` where nothing is asked).
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        if self.flip {
            parts.push("flip".to_string());
        }
        if self.crop > 0 {
            parts.push(format!("crop={}", self.crop));
        }
        if parts.is_empty() { "none".into() } else { parts.join(",") }
    }

    /// A note where the crop's padding is half the image's side or more:
    /// most of a crop is then padding (`crop=9` of an 8x8 image trained
    /// worse than guessing).
    pub(super) fn caution(&self, name: &str, form: Form) -> Option<String> {
        let side = form.height.min(form.width);
        (self.crop > 0 && 2 * self.crop >= side).then(|| {
            format!(
                "{name}: --augment crop={} on {}x{} images: a crop may be mostly padding (CIFAR's 32x32 take crop=4)",
                self.crop, form.width, form.height
            )
        })
    }

    /// Augments one example's `values` (an image of `form`) by the draw
    /// `key`; a pixel padded in takes `fill`'s value at its place.
    pub(super) fn apply(&self, values: &mut [f64], form: Form, fill: &[f64], key: u64) {
        let (c, h, w) = (form.channels, form.height, form.width);
        let flip = self.flip && key & 1 == 1;
        let span = 2 * self.crop + 1;
        let (dy, dx) = if self.crop > 0 {
            ((((key >> 8) & 0xFF_FFFF) % span as u64) as isize, ((key >> 32) % span as u64) as isize)
        } else {
            (self.crop as isize, self.crop as isize)
        };
        let (shift_y, shift_x) = (dy - self.crop as isize, dx - self.crop as isize);
        if !flip && shift_y == 0 && shift_x == 0 {
            return;
        }
        let at = |ch: usize, y: usize, x: usize| match form.layout {
            Layout::ChannelsFirst => (ch * h + y) * w + x,
            Layout::ChannelsLast => (y * w + x) * c + ch,
        };
        let source = values.to_vec();
        for ch in 0..c {
            for y in 0..h {
                for x in 0..w {
                    // The output's (y, x) is the padded image's (y + dy,
                    // x' + dx), x' the flipped column.
                    let col = if flip { w - 1 - x } else { x };
                    let (sy, sx) = (y as isize + shift_y, col as isize + shift_x);
                    let inside = (0..h as isize).contains(&sy) && (0..w as isize).contains(&sx);
                    let to = at(ch, y, x);
                    values[to] = if inside {
                        source[at(ch, sy as usize, sx as usize)]
                    } else {
                        fill.get(to).copied().unwrap_or(0.0)
                    };
                }
            }
        }
    }
}

/// The draw of `row` at `step` of a run of `seed` (splitmix64 of the three).
pub(super) fn key(seed: u64, step: u64, row: usize) -> u64 {
    let mut z = seed
        .wrapping_add(step.wrapping_mul(0x9E37_79B9_7F4A_7C15))
        .wrapping_add((row as u64).wrapping_mul(0xD1B5_4A32_D192_ED03))
        .wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_what_it_describes() {
        for text in ["flip", "crop=4", "flip,crop=2", "none"] {
            assert_eq!(Augment::parse(text).expect(text).describe(), text);
        }
        assert!(Augment::parse("crop").unwrap_err().contains("crop=P"));
        assert!(Augment::parse("rotate").unwrap_err().contains("'rotate'"));
        assert!(Augment::parse("crop=-1").is_err());
    }

    #[test]
    fn flips_and_crops_with_zeros() {
        // One channel, 2 x 3: rows [1 2 3], [4 5 6].
        let form = Form { channels: 1, height: 2, width: 3, layout: Layout::ChannelsFirst };
        let image = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0];
        let flip = Augment { flip: true, crop: 0 };
        let mut v = image;
        flip.apply(&mut v, form, &[0.0; 6], 1);
        assert_eq!(v, [3.0, 2.0, 1.0, 6.0, 5.0, 4.0]);
        let mut v = image;
        flip.apply(&mut v, form, &[0.0; 6], 0);
        assert_eq!(v, image);
        // crop=1 at offset (dy, dx) = (2, 0) of the padded image: the image
        // moves up one and right one, the bottom row and the left column
        // zeros.
        let crop = Augment { flip: false, crop: 1 };
        let key = (2u64 << 8) | (0u64 << 32);
        let mut v = image;
        crop.apply(&mut v, form, &[0.0; 6], key);
        assert_eq!(v, [0.0, 4.0, 5.0, 0.0, 0.0, 0.0]);
        // Padded with the fill (black standardized).
        let mut v = image;
        crop.apply(&mut v, form, &[-1.0; 6], key);
        assert_eq!(v, [-1.0, 4.0, 5.0, -1.0, -1.0, -1.0]);
        // The centre offset (1, 1) leaves it.
        let mut v = image;
        crop.apply(&mut v, form, &[0.0; 6], (1u64 << 8) | (1u64 << 32));
        assert_eq!(v, image);
        // Channels last moves whole pixels.
        let rgb = Form { channels: 2, height: 1, width: 2, layout: Layout::ChannelsLast };
        let mut v = [1.0, 10.0, 2.0, 20.0];
        flip.apply(&mut v, rgb, &[0.0; 4], 1);
        assert_eq!(v, [2.0, 20.0, 1.0, 10.0]);
    }

    #[test]
    fn draws_differ_by_row_and_step_and_repeat() {
        assert_eq!(key(7, 3, 11), key(7, 3, 11));
        assert_ne!(key(7, 3, 11), key(7, 4, 11));
        assert_ne!(key(7, 3, 11), key(7, 3, 12));
        // About half of the rows flip.
        let flips = (0..1000).filter(|&r| key(1, 0, r) & 1 == 1).count();
        assert!((400..600).contains(&flips), "{flips}");
    }
}
