//! The int8 kernel on AVX-512 VNNI: activations quantised sixteen at a time, the products of a tile of rows and
//! a panel of outputs summed in i32, the results scaled back with GELU, and the polynomial exp and GELU it uses.

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
    unsafe {
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
}

/// See [`super::Int8Linear::finish`], sixteen columns at a time, GELU included.
///
/// # Safety
/// AVX-512 F/BW must be available; `sums`, `scale` and `bias` as long as `dst`, which is at most `PANEL`.
#[allow(clippy::too_many_arguments, reason = "a kernel over plain slices: the shapes and buffers are its arguments")]
#[target_feature(enable = "avx512f,avx512bw,avx512vnni,fma")]
pub unsafe fn finish(acc: &[i32; PANEL], a_scale: f32, a_zero: i32, sums: &[i32], scale: &[f32], bias: &[f32], dst: &mut [f32], gelu: bool) {
    unsafe {
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
    unsafe {
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
