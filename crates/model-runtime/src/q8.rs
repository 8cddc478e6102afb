//! Products with Q8_0 weights (GGUF blocks of 32 int8 values and one f16 scale) that stay int8, on AVX-512 VNNI.
//!
//! The activations are quantized as llama.cpp and candle quantize them for a Q8_0 product: per block of 32, scale
//! `d = max|x| / 127` rounded to f16, values `round(x / d)`. They are stored as u8 with 128 added, because VNNI
//! multiplies u8 by i8; the block's `128 x sum(weights)`, kept from load, takes the offset back out. Each block's
//! integer dot products are exact, then scaled by both blocks' scales into f32 sums: the result is llama.cpp's
//! Q8_0 product within float summation order, with 64 multiply-adds an instruction and a register tile of 4 rows by
//! 32 outputs that reuses each loaded weight 4 times.
//!
//! Where this kernel cannot run ([`Linear::new`] decides: no VNNI, `MEMORY_LOCAL_INT8=off`, another quantization
//! or a shape that is not whole tiles) the matrix stays a candle `QMatMul`; F16 matrices on the same CPUs stay in
//! half precision on `f16::F16Weight`.

use candle_core::quantized::{GgmlDType, QMatMul, QTensor};
use candle_core::{Device, Module, Tensor};
use rayon::prelude::*;

use crate::int8::SharedOut;

/// Values per Q8_0 block.
const BLOCK: usize = 32;
/// Bytes per Q8_0 block in the file: an f16 scale then 32 int8.
const BLOCK_BYTES: usize = 34;
/// Outputs per panel: two 16-lane registers.
const PANEL: usize = 32;
/// Rows per register tile.
const TILE_ROWS: usize = 4;

/// A weight matrix `[out, inp]` as the forward pass uses it: `x W^T`.
pub enum Linear {
    Q8(Q8Weight),
    F16(super::f16::F16Weight),
    Candle(QMatMul),
}

impl Linear {
    pub fn new(w: std::sync::Arc<QTensor>) -> candle_core::Result<Self> {
        if let [out, inp] = w.shape().dims()[..] {
            if w.dtype() == GgmlDType::Q8_0 && super::int8::enabled() && inp.is_multiple_of(BLOCK) && out.is_multiple_of(PANEL) {
                return Ok(Linear::Q8(Q8Weight::new(out, inp, &w.data()?)));
            }
            if w.dtype() == GgmlDType::F16 && super::int8::enabled() && out.is_multiple_of(super::f16::PANEL) {
                return Ok(Linear::F16(super::f16::F16Weight::new(out, inp, &w.data()?)));
            }
        }
        QMatMul::from_arc(w).map(Linear::Candle)
    }

    /// `x W^T` for `x` of `(rows, inp)`.
    pub fn forward(&self, x: &Input) -> candle_core::Result<Tensor> {
        match self {
            Linear::Candle(m) => m.forward(&x.x),
            Linear::F16(w) => w.forward(&x.x),
            Linear::Q8(w) => {
                if x.q.get().is_none() {
                    let rows = x.x.flatten_all()?.to_vec1::<f32>()?;
                    let _ = x.q.set(Q8Rows::new(&rows, x.x.dims2()?.1));
                }
                w.forward(x.q.get().expect("quantized above"))
            }
        }
    }
}

/// Activations that several products read (Q, K and V; gate and up): quantized once, on first use.
pub struct Input {
    x: Tensor,
    q: std::sync::OnceLock<Q8Rows>,
}

impl Input {
    pub fn new(x: &Tensor) -> Self {
        Input { x: x.clone(), q: std::sync::OnceLock::new() }
    }
}

/// Rows of activations quantized per block of 32: u8 values (int8 + 128) and one f32 scale per block.
pub struct Q8Rows {
    rows: usize,
    blocks: usize,
    values: Vec<u8>,
    scales: Vec<f32>,
}

impl Q8Rows {
    fn new(x: &[f32], width: usize) -> Self {
        let rows = x.len() / width;
        let blocks = width / BLOCK;
        let mut values = vec![0u8; x.len()];
        let mut scales = vec![0f32; rows * blocks];
        values.par_chunks_mut(width).zip(scales.par_chunks_mut(blocks)).zip(x.par_chunks(width)).for_each(|((v, s), x)| {
            // SAFETY: a `Q8Weight` (the only consumer) exists only where `int8::enabled()` saw AVX-512 VNNI.
            #[cfg(target_arch = "x86_64")]
            unsafe {
                kernel::quantize_row(x, v, s);
            }
            // Elsewhere no `Q8Weight` exists to read these rows (`int8::enabled()` is false).
            #[cfg(not(target_arch = "x86_64"))]
            let _ = (x, v, s);
        });
        Q8Rows { rows, blocks, values, scales }
    }
}

/// Q8_0 weights packed for the kernel: per panel of 32 outputs, per block of 32 inputs, per group of 4 inputs,
/// the 32 outputs' 4 int8 values side by side (what one VNNI instruction per 16 outputs multiplies).
pub struct Q8Weight {
    out: usize,
    inp: usize,
    packed: Vec<i8>,
    /// Per panel, per block: the 32 outputs' scales.
    scales: Vec<f32>,
    /// Per panel, per block: the 32 outputs' `-128 x sum(int8 values)`, the activations' offset taken back out.
    offsets: Vec<i32>,
}

impl Q8Weight {
    /// From the file's bytes: `out` rows of `inp / 32` blocks.
    fn new(out: usize, inp: usize, bytes: &[u8]) -> Self {
        let blocks = inp / BLOCK;
        assert_eq!(bytes.len(), out * blocks * BLOCK_BYTES, "Q8_0 weight size");
        let panel_len = blocks * BLOCK * PANEL;
        let mut packed = vec![0i8; out * inp];
        let mut scales = vec![0f32; out * blocks];
        let mut offsets = vec![0i32; out * blocks];
        packed.par_chunks_mut(panel_len).zip(scales.par_chunks_mut(blocks * PANEL)).zip(offsets.par_chunks_mut(blocks * PANEL)).enumerate().for_each(
            |(panel, ((packed, scales), offsets))| {
                for c in 0..PANEL {
                    let row = &bytes[(panel * PANEL + c) * blocks * BLOCK_BYTES..][..blocks * BLOCK_BYTES];
                    for (b, block) in row.chunks_exact(BLOCK_BYTES).enumerate() {
                        scales[b * PANEL + c] = f16_to_f32(u16::from_le_bytes([block[0], block[1]]));
                        let q = &block[2..];
                        offsets[b * PANEL + c] = -128 * q.iter().map(|&v| v as i8 as i32).sum::<i32>();
                        for (g, four) in q.chunks_exact(4).enumerate() {
                            let at = b * BLOCK * PANEL + g * 4 * PANEL + c * 4;
                            for (j, &v) in four.iter().enumerate() {
                                packed[at + j] = v as i8;
                            }
                        }
                    }
                }
            },
        );
        Q8Weight { out, inp, packed, scales, offsets }
    }

    fn forward(&self, x: &Q8Rows) -> candle_core::Result<Tensor> {
        if !cfg!(target_arch = "x86_64") {
            candle_core::bail!("the Q8_0 kernel is built for x86-64 only");
        }
        if x.blocks * BLOCK != self.inp {
            candle_core::bail!("a product of {} inputs given rows of {}", self.inp, x.blocks * BLOCK);
        }
        let (rows, blocks, out) = (x.rows, x.blocks, self.out);
        let mut y = vec![0f32; rows * out];
        let dst = SharedOut(y.as_mut_ptr());
        // Panels in parallel: each writes its own 32 columns of every row.
        (0..out / PANEL).into_par_iter().for_each(|panel| {
            let w = &self.packed[panel * blocks * BLOCK * PANEL..][..blocks * BLOCK * PANEL];
            let scales = &self.scales[panel * blocks * PANEL..][..blocks * PANEL];
            let offsets = &self.offsets[panel * blocks * PANEL..][..blocks * PANEL];
            for r0 in (0..rows).step_by(TILE_ROWS) {
                let a = &x.values[r0 * self.inp..];
                let a_scales = &x.scales[r0 * blocks..];
                // SAFETY: VNNI is present (see `Q8Rows::new`); the tile reads `n` rows of `a` and `a_scales`,
                // which exist, and writes columns `panel * 32..+32` of rows `r0..r0 + n`, which no other task
                // writes.
                #[cfg(target_arch = "x86_64")]
                unsafe {
                    let y = dst.get().add(r0 * out + panel * PANEL);
                    match rows - r0 {
                        1 => kernel::tile::<1>(a, a_scales, w, scales, offsets, blocks, y, out),
                        2 => kernel::tile::<2>(a, a_scales, w, scales, offsets, blocks, y, out),
                        3 => kernel::tile::<3>(a, a_scales, w, scales, offsets, blocks, y, out),
                        _ => kernel::tile::<4>(a, a_scales, w, scales, offsets, blocks, y, out),
                    }
                }
                #[cfg(not(target_arch = "x86_64"))]
                let _ = (a, a_scales, w, scales, offsets, blocks, &dst, out);
            }
        });
        Tensor::from_vec(y, (rows, out), &Device::Cpu)
    }
}

/// IEEE half to single precision (the weights' block scales, read once at load).
fn f16_to_f32(h: u16) -> f32 {
    let sign = ((h as u32) & 0x8000) << 16;
    let exp = ((h >> 10) & 0x1f) as u32;
    let frac = (h & 0x3ff) as u32;
    match exp {
        // Zero and subnormals: frac x 2^-24.
        0 => f32::from_bits(sign | (frac as f32 * 2f32.powi(-24)).to_bits()),
        31 => f32::from_bits(sign | 0x7f80_0000 | (frac << 13)),
        _ => f32::from_bits(sign | ((exp + 112) << 23) | (frac << 13)),
    }
}

#[cfg(target_arch = "x86_64")]
mod kernel {
    use super::{BLOCK, PANEL};
    use std::arch::x86_64::*;

    /// One row to Q8 blocks as llama.cpp's `quantize_row_q8_0`: `d = max|x| / 127` kept as f16, values
    /// `round(x / d)` (ties to even), stored plus 128.
    ///
    /// # Safety
    /// AVX-512 F/BW and F16C must be available; `x` and `v` whole blocks, `s` one entry a block.
    #[target_feature(enable = "avx512f,avx512bw,avx512vnni,fma,f16c")]
    pub unsafe fn quantize_row(x: &[f32], v: &mut [u8], s: &mut [f32]) {
        unsafe {
            let offset = _mm512_set1_epi32(128);
            for (b, scale) in s.iter_mut().enumerate() {
                let p = x.as_ptr().add(b * BLOCK);
                let (lo, hi) = (_mm512_loadu_ps(p), _mm512_loadu_ps(p.add(16)));
                let amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(lo), _mm512_abs_ps(hi)));
                let d = amax / 127.0;
                let inv = _mm512_set1_ps(if d != 0.0 { 1.0 / d } else { 0.0 });
                *scale = _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(_mm_set_ss(d))));
                let dst = v.as_mut_ptr().add(b * BLOCK);
                for (half, part) in [lo, hi].into_iter().enumerate() {
                    let q = _mm512_add_epi32(_mm512_cvtps_epi32(_mm512_mul_ps(part, inv)), offset);
                    _mm512_mask_cvtusepi32_storeu_epi8(dst.add(half * 16) as *mut _, 0xffff, q);
                }
            }
        }
    }

    /// `y[r][c] = sum over blocks of a_scale[r][b] w_scale[c][b] (a[r][b] . w[c][b] - 128 sum w[c][b])` for `R`
    /// rows and one panel of 32 outputs.
    ///
    /// # Safety
    /// AVX-512 F/BW/VNNI must be available; `a` holds `R` rows of `blocks * 32` bytes and `a_scales` `R` rows of
    /// `blocks`, `w`, `w_scales` and `offsets` one panel; `y` has `R` rows of 32 at `y_stride`.
    #[allow(clippy::too_many_arguments, reason = "a kernel over plain slices: the shapes and buffers are its arguments")]
    #[target_feature(enable = "avx512f,avx512bw,avx512vnni,fma")]
    pub unsafe fn tile<const R: usize>(
        a: &[u8],
        a_scales: &[f32],
        w: &[i8],
        w_scales: &[f32],
        offsets: &[i32],
        blocks: usize,
        y: *mut f32,
        y_stride: usize,
    ) {
        unsafe {
            let width = blocks * BLOCK;
            let mut sum = [[_mm512_setzero_ps(); 2]; R];
            for b in 0..blocks {
                let off = offsets.as_ptr().add(b * PANEL);
                let (o0, o1) = (_mm512_loadu_si512(off as *const _), _mm512_loadu_si512(off.add(16) as *const _));
                let mut dot = [[o0, o1]; R];
                let wb = w.as_ptr().add(b * BLOCK * PANEL);
                for g in 0..BLOCK / 4 {
                    let w0 = _mm512_loadu_si512(wb.add(g * 4 * PANEL) as *const _);
                    let w1 = _mm512_loadu_si512(wb.add(g * 4 * PANEL + 64) as *const _);
                    for (r, d) in dot.iter_mut().enumerate() {
                        let av = _mm512_set1_epi32((a.as_ptr().add(r * width + b * BLOCK + g * 4) as *const i32).read_unaligned());
                        d[0] = _mm512_dpbusd_epi32(d[0], av, w0);
                        d[1] = _mm512_dpbusd_epi32(d[1], av, w1);
                    }
                }
                let ws = w_scales.as_ptr().add(b * PANEL);
                let (s0, s1) = (_mm512_loadu_ps(ws), _mm512_loadu_ps(ws.add(16)));
                for (r, (d, acc)) in dot.iter().zip(sum.iter_mut()).enumerate() {
                    let ar = _mm512_set1_ps(*a_scales.get_unchecked(r * blocks + b));
                    acc[0] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(d[0]), _mm512_mul_ps(s0, ar), acc[0]);
                    acc[1] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(d[1]), _mm512_mul_ps(s1, ar), acc[1]);
                }
            }
            for (r, acc) in sum.iter().enumerate() {
                let row = y.add(r * y_stride);
                _mm512_storeu_ps(row, acc[0]);
                _mm512_storeu_ps(row.add(16), acc[1]);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A Q8_0 tensor of `out x inp` pseudo-random values.
    fn q8_tensor(out: usize, inp: usize, seed: &mut u64) -> std::sync::Arc<QTensor> {
        let mut v = Vec::with_capacity(out * inp);
        for _ in 0..out * inp {
            *seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            v.push(((*seed >> 40) as f32 / (1u64 << 24) as f32 - 0.5) * 0.2);
        }
        let t = Tensor::from_vec(v, (out, inp), &Device::Cpu).unwrap();
        std::sync::Arc::new(QTensor::quantize(&t, GgmlDType::Q8_0).unwrap())
    }

    /// The definition the kernel follows (llama.cpp's): activations in Q8_0 blocks, times the dequantized weights.
    /// Rows made of Q8_0 values quantize to themselves, so the sum is the plain one over the dequantized values.
    /// `lin`'s output on `x` is the plain product with `w`'s values, computed in f64, within 1e-5 relative.
    fn assert_is_the_product(lin: &Linear, x: &Tensor, w: &QTensor) {
        let (rows, inp) = x.dims2().unwrap();
        let wv = w.dequantize(&Device::Cpu).unwrap().flatten_all().unwrap().to_vec1::<f32>().unwrap();
        let out = wv.len() / inp;
        let xv = x.flatten_all().unwrap().to_vec1::<f32>().unwrap();
        let got = lin.forward(&Input::new(x)).unwrap().flatten_all().unwrap().to_vec1::<f32>().unwrap();
        for r in 0..rows {
            for c in 0..out {
                let want: f64 = (0..inp).map(|k| xv[r * inp + k] as f64 * wv[c * inp + k] as f64).sum();
                let g = got[r * out + c] as f64;
                assert!((g - want).abs() <= 1e-5 * (1.0 + want.abs()), "{rows}x{inp} by {out}, [{r}][{c}]: {g} vs {want}");
            }
        }
    }

    #[test]
    fn the_kernel_is_the_q8_product() {
        if !super::super::int8::enabled() {
            eprintln!("no AVX-512 VNNI here: the Q8_0 kernel is not used");
            return;
        }
        let mut seed = 7u64;
        for (rows, out, inp) in [(1, 32, 32), (3, 64, 96), (17, 96, 768), (9, 256, 1152)] {
            let w = q8_tensor(out, inp, &mut seed);
            let x = q8_tensor(rows, inp, &mut seed).dequantize(&Device::Cpu).unwrap();
            let lin = Linear::new(w.clone()).unwrap();
            assert!(matches!(lin, Linear::Q8(_)));
            assert_is_the_product(&lin, &x, &w);
        }
    }

    /// F16 weights stay half precision: the product is the plain one over the weights' values, in f32.
    #[test]
    fn the_f16_kernel_is_the_product() {
        if !super::super::int8::enabled() {
            eprintln!("no AVX-512 here: F16 weights are dequantized to f32");
            return;
        }
        let mut seed = 11u64;
        for (rows, out, inp) in [(1usize, 32usize, 8usize), (3, 64, 96), (6, 96, 770), (9, 256, 384)] {
            let w = q8_tensor(out, inp.next_multiple_of(32), &mut seed).dequantize(&Device::Cpu).unwrap().narrow(1, 0, inp).unwrap();
            let w = std::sync::Arc::new(QTensor::quantize(&w.contiguous().unwrap(), GgmlDType::F16).unwrap());
            let x = q8_tensor(rows, inp.next_multiple_of(32), &mut seed)
                .dequantize(&Device::Cpu)
                .unwrap()
                .narrow(1, 0, inp)
                .unwrap()
                .contiguous()
                .unwrap();
            let lin = Linear::new(w.clone()).unwrap();
            assert!(matches!(lin, Linear::F16(_)));
            assert_is_the_product(&lin, &x, &w);
        }
    }

    #[test]
    fn half_floats_convert() {
        for (h, f) in [(0x3c00u16, 1.0f32), (0xc000, -2.0), (0x0000, 0.0), (0x3555, 0.333_251_95), (0x0001, 5.960_464_5e-8), (0x7bff, 65504.0)] {
            assert_eq!(f16_to_f32(h), f, "{h:#x}");
        }
    }
}
