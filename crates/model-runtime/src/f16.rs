//! Products with F16 weights (a GGUF file's half-precision matrices, nomic-embed-text's F16 file) that stay in half
//! precision in memory, on AVX-512: each weight is widened to f32 as it is loaded and multiplied with f32
//! activations, sums in f32. Dequantizing the matrices to f32 at load (candle's `QMatMul` does) doubles the bytes
//! every product reads, which is what a short query waits for (docs/benchmark-history.md has the measurements).
//!
//! Layout: per panel of 32 outputs, per input, the 32 outputs' weights side by side (one 64-byte load widened into
//! two 16-lane registers); a register tile of 8 rows by 32 outputs reuses each loaded weight 8 times.

use candle_core::{Device, Tensor};
use rayon::prelude::*;

use crate::int8::SharedOut;

/// Outputs per panel: two 16-lane registers.
pub const PANEL: usize = 32;
/// Rows per register tile.
const TILE_ROWS: usize = 8;

/// F16 weights `[out, inp]` packed for the kernel.
pub struct F16Weight {
    out: usize,
    inp: usize,
    /// Per panel, per input, the 32 outputs' half-precision bits.
    packed: Vec<u16>,
}

impl F16Weight {
    /// From the file's bytes: `out` rows of `inp` little-endian halves. `out` is whole panels.
    pub fn new(out: usize, inp: usize, bytes: &[u8]) -> Self {
        assert_eq!(bytes.len(), out * inp * 2, "F16 weight size");
        assert!(out.is_multiple_of(PANEL), "F16 weight rows are whole panels");
        let mut packed = vec![0u16; out * inp];
        packed.par_chunks_mut(inp * PANEL).enumerate().for_each(|(panel, dst)| {
            for c in 0..PANEL {
                let row = &bytes[(panel * PANEL + c) * inp * 2..][..inp * 2];
                for (k, h) in row.chunks_exact(2).enumerate() {
                    dst[k * PANEL + c] = u16::from_le_bytes([h[0], h[1]]);
                }
            }
        });
        F16Weight { out, inp, packed }
    }

    /// `x W^T` for `x` of `(rows, inp)`.
    pub fn forward(&self, x: &Tensor) -> candle_core::Result<Tensor> {
        if !cfg!(target_arch = "x86_64") {
            candle_core::bail!("the F16 kernel is built for x86-64 only");
        }
        let (rows, inp) = x.dims2()?;
        if inp != self.inp {
            candle_core::bail!("a product of {} inputs given rows of {inp}", self.inp);
        }
        let a = x.flatten_all()?.to_vec1::<f32>()?;
        let out = self.out;
        let mut y = vec![0f32; rows * out];
        let dst = SharedOut(y.as_mut_ptr());
        // Panels in parallel: each writes its own 32 columns of every row.
        (0..out / PANEL).into_par_iter().for_each(|panel| {
            let w = &self.packed[panel * inp * PANEL..][..inp * PANEL];
            for r0 in (0..rows).step_by(TILE_ROWS) {
                let a = &a[r0 * inp..];
                // SAFETY: an `F16Weight` is made only where `int8::enabled()` saw AVX-512 (F16C comes with it);
                // the tile reads `n` rows of `a`, which exist, and writes columns `panel * 32..+32` of rows
                // `r0..r0 + n`, which no other task writes.
                #[cfg(target_arch = "x86_64")]
                unsafe {
                    let y = dst.get().add(r0 * out + panel * PANEL);
                    match rows - r0 {
                        1 => kernel::tile::<1>(a, inp, w, y, out),
                        2 => kernel::tile::<2>(a, inp, w, y, out),
                        3 => kernel::tile::<3>(a, inp, w, y, out),
                        4 => kernel::tile::<4>(a, inp, w, y, out),
                        5 => kernel::tile::<5>(a, inp, w, y, out),
                        6 => kernel::tile::<6>(a, inp, w, y, out),
                        7 => kernel::tile::<7>(a, inp, w, y, out),
                        _ => kernel::tile::<8>(a, inp, w, y, out),
                    }
                }
                #[cfg(not(target_arch = "x86_64"))]
                let _ = (a, w, &dst, out);
            }
        });
        Tensor::from_vec(y, (rows, out), &Device::Cpu)
    }
}

#[cfg(target_arch = "x86_64")]
mod kernel {
    use super::PANEL;
    use std::arch::x86_64::*;

    /// `y[r][c] = sum over k of a[r][k] w[c][k]` for `R` rows and one panel of 32 outputs.
    ///
    /// # Safety
    /// AVX-512 F and F16C must be available; `a` holds `R` rows of `inp`, `w` one panel (`inp * 32`); `y` has `R`
    /// rows of 32 at `y_stride`.
    #[target_feature(enable = "avx512f,f16c,fma")]
    pub unsafe fn tile<const R: usize>(a: &[f32], inp: usize, w: &[u16], y: *mut f32, y_stride: usize) {
        unsafe {
            let mut acc = [[_mm512_setzero_ps(); 2]; R];
            let wp = w.as_ptr();
            for k in 0..inp {
                let w0 = _mm512_cvtph_ps(_mm256_loadu_si256(wp.add(k * PANEL) as *const __m256i));
                let w1 = _mm512_cvtph_ps(_mm256_loadu_si256(wp.add(k * PANEL + 16) as *const __m256i));
                for (r, acc) in acc.iter_mut().enumerate() {
                    let av = _mm512_set1_ps(*a.get_unchecked(r * inp + k));
                    acc[0] = _mm512_fmadd_ps(av, w0, acc[0]);
                    acc[1] = _mm512_fmadd_ps(av, w1, acc[1]);
                }
            }
            for (r, acc) in acc.iter().enumerate() {
                let row = y.add(r * y_stride);
                _mm512_storeu_ps(row, acc[0]);
                _mm512_storeu_ps(row.add(16), acc[1]);
            }
        }
    }
}
