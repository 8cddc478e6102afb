//! The encoder layers of an int8 model on plain row-major buffers instead of candle tensors.
//!
//! Once the dense layers ran in int8 (`super::int8`), most of a reranking pass went to what candle does around
//! them: a tensor allocated, filled and copied for every transpose, mask, scale and softmax, each a parallel
//! step that wakes and parks its worker threads, and a scalar `expf` per attention score. Here the tokens of
//! all sequences sit packed in one `tokens x hidden` buffer (no padding rows at all), attention runs per
//! (sequence, head) over that sequence's own keys only (so no mask), the softmax and the layer norms run sixteen
//! lanes wide, and the residual is added inside the norm. Used where every dense layer of the model is int8 (so
//! AVX-512 VNNI is there) and the model is a plain BERT (no relative position bias, erf GELU); other models keep
//! the candle path, which this one equals within float rounding (tests in `super::bert`).

use rayon::prelude::*;

use crate::int8::{Activation, Int8Linear};

/// A layer norm's parameters.
pub struct Norm {
    pub weight: Vec<f32>,
    pub bias: Vec<f32>,
    pub eps: f32,
}

/// One encoder layer, its dense layers in int8.
pub struct Layer<'a> {
    pub query: &'a Int8Linear,
    pub key: &'a Int8Linear,
    pub value: &'a Int8Linear,
    pub attn_out: &'a Int8Linear,
    pub attn_norm: &'a Norm,
    pub intermediate: &'a Int8Linear,
    pub output: &'a Int8Linear,
    pub out_norm: &'a Norm,
}

/// Runs `layers` over `x`, `tokens x hidden` with the sequences' tokens packed one after another (`lens` tokens
/// each), in place.
pub fn encode(layers: &[Layer], x: &mut Vec<f32>, lens: &[usize], heads: usize) {
    let rows: usize = lens.iter().sum();
    if rows == 0 || layers.is_empty() {
        return;
    }
    let hidden = x.len() / rows;
    debug_assert_eq!(x.len(), rows * hidden);
    for l in layers {
        let q = l.query.forward(x, rows, Activation::None);
        let k = l.key.forward(x, rows, Activation::None);
        let v = l.value.forward(x, rows, Activation::None);
        let ctx = attention(&q, &k, &v, lens, heads, hidden);
        let mut a = l.attn_out.forward(&ctx, rows, Activation::None);
        add_norm(&mut a, x, l.attn_norm);
        let inter = l.intermediate.forward(&a, rows, Activation::GeluErf);
        let mut o = l.output.forward(&inter, rows, Activation::None);
        add_norm(&mut o, &a, l.out_norm);
        *x = o;
    }
}

/// Scaled dot-product attention of packed sequences: `q`, `k`, `v` and the result `tokens x hidden`, `heads`
/// heads of `hidden / heads` columns; each token attends to its own sequence's tokens.
fn attention(q: &[f32], k: &[f32], v: &[f32], lens: &[usize], heads: usize, hidden: usize) -> Vec<f32> {
    let dim = hidden / heads;
    let starts: Vec<usize> = lens.iter().scan(0, |s, l| Some(std::mem::replace(s, *s + l))).collect();
    let tasks: Vec<(usize, usize)> = (0..lens.len()).filter(|s| lens[*s] > 0).flat_map(|s| (0..heads).map(move |h| (s, h))).collect();
    let parts: Vec<Vec<f32>> = tasks
        .par_iter()
        .map(|&(s, h)| {
            // SAFETY: this path runs only for int8 models, whose layers exist only where `int8::supported()`.
            unsafe { head(q, k, v, starts[s], lens[s], h * dim, dim, hidden) }
        })
        .collect();
    let mut out = vec![0f32; q.len()];
    for (&(s, h), part) in tasks.iter().zip(parts) {
        for (t, row) in part.chunks(dim).enumerate() {
            let at = (starts[s] + t) * hidden + h * dim;
            out[at..at + dim].copy_from_slice(row);
        }
    }
    out
}

/// One head of one sequence: `len` tokens from row `start`, columns `col..col + dim`; `len x dim` out.
///
/// # Safety
/// AVX-512 F must be available.
#[allow(clippy::too_many_arguments, reason = "a kernel over plain slices: the shapes and buffers are its arguments")]
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512vnni,fma")]
unsafe fn head(q: &[f32], k: &[f32], v: &[f32], start: usize, len: usize, col: usize, dim: usize, hidden: usize) -> Vec<f32> {
    unsafe {
        use std::arch::x86_64::*;
        let at = |t: usize| (start + t) * hidden + col;
        // Keys transposed (dim x keys, keys padded to 64 with zeros), so a query's scores against sixteen keys are
        // one register: dim multiply-adds of a broadcast query value, four registers at a time so the sums do not
        // wait on each other.
        let stride = len.div_ceil(64) * 64;
        let mut kt = vec![0f32; dim * stride];
        for t in 0..len {
            for (d, kv) in k[at(t)..at(t) + dim].iter().enumerate() {
                kt[d * stride + t] = *kv;
            }
        }
        let scale = 1.0 / (dim as f32).sqrt();
        let mut out = vec![0f32; len * dim];
        let mut scores = vec![0f32; stride];
        let mut qs = vec![0f32; dim];
        for i in 0..len {
            for (a, b) in qs.iter_mut().zip(&q[at(i)..at(i) + dim]) {
                *a = b * scale;
            }
            let mut j = 0;
            while j < len {
                let mut acc = [_mm512_setzero_ps(); 4];
                for (d, qd) in qs.iter().enumerate() {
                    let (qv, row) = (_mm512_set1_ps(*qd), kt.as_ptr().add(d * stride + j));
                    for (b, a) in acc.iter_mut().enumerate() {
                        *a = _mm512_fmadd_ps(qv, _mm512_loadu_ps(row.add(16 * b)), *a);
                    }
                }
                for (b, a) in acc.iter().enumerate() {
                    _mm512_storeu_ps(scores.as_mut_ptr().add(j + 16 * b), *a);
                }
                j += 64;
            }
            let scores = &mut scores[..len];
            let inv = 1.0 / softmax_unnormalised(scores);
            let ctx = &mut out[i * dim..(i + 1) * dim];
            // The context row held in registers across the keys (sixteen columns a register).
            match dim {
                32 => weighted_rows::<2>(scores, v, at, ctx),
                64 => weighted_rows::<4>(scores, v, at, ctx),
                _ => {
                    for (t, p) in scores.iter().enumerate() {
                        for (c, vv) in ctx.iter_mut().zip(&v[at(t)..at(t) + dim]) {
                            *c += p * vv;
                        }
                    }
                }
            }
            ctx.iter_mut().for_each(|c| *c *= inv);
        }
        out
    }
}

#[cfg(not(target_arch = "x86_64"))]
#[allow(clippy::too_many_arguments, reason = "a kernel over plain slices: the shapes and buffers are its arguments")]
unsafe fn head(_: &[f32], _: &[f32], _: &[f32], _: usize, _: usize, _: usize, _: usize, _: usize) -> Vec<f32> {
    unreachable!("the int8 path is built for x86-64 only");
}

/// `out = sum_t p[t] v[row(t)]` for rows of `16 * R` columns.
///
/// # Safety
/// AVX-512 F must be available; every row `row(t)..row(t) + 16 * R` inside `v`, `out` that long.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512vnni,fma")]
unsafe fn weighted_rows<const R: usize>(p: &[f32], v: &[f32], row: impl Fn(usize) -> usize, out: &mut [f32]) {
    unsafe {
        use std::arch::x86_64::*;
        debug_assert_eq!(out.len(), 16 * R);
        // Even and odd keys in separate registers: twice the independent sums in flight.
        let mut acc = [[_mm512_setzero_ps(); R]; 2];
        for (t, pt) in p.iter().enumerate() {
            let (w, r) = (_mm512_set1_ps(*pt), row(t));
            debug_assert!(r + 16 * R <= v.len());
            for (c, a) in acc[t & 1].iter_mut().enumerate() {
                *a = _mm512_fmadd_ps(w, _mm512_loadu_ps(v.as_ptr().add(r + 16 * c)), *a);
            }
        }
        for (c, (even, odd)) in acc[0].iter().zip(&acc[1]).enumerate() {
            _mm512_storeu_ps(out.as_mut_ptr().add(16 * c), _mm512_add_ps(*even, *odd));
        }
    }
}

/// In place: `e^(s - max)`; returns their sum (the caller divides once per output instead of once per score).
///
/// # Safety
/// AVX-512 F must be available.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512vnni,fma")]
unsafe fn softmax_unnormalised(s: &mut [f32]) -> f32 {
    unsafe {
        use std::arch::x86_64::*;
        let n = s.len();
        let max = s.iter().fold(f32::NEG_INFINITY, |a, b| a.max(*b));
        let m = _mm512_set1_ps(max);
        let mut sum = _mm512_setzero_ps();
        let mut i = 0;
        while i < n {
            let lanes = super::int8::vnni::lanes(n - i);
            let p = s.as_mut_ptr().add(i);
            let e = _mm512_maskz_mov_ps(lanes, super::int8::vnni::exp(_mm512_sub_ps(_mm512_maskz_loadu_ps(lanes, p), m)));
            sum = _mm512_add_ps(sum, e);
            _mm512_mask_storeu_ps(p, lanes, e);
            i += 16;
        }
        _mm512_reduce_add_ps(sum)
    }
}

/// `y = norm(y + x)` row by row (the residual added inside the norm).
fn add_norm(y: &mut [f32], x: &[f32], n: &Norm) {
    let h = n.weight.len();
    y.par_chunks_mut(h * 16).zip(x.par_chunks(h * 16)).for_each(|(ys, xs)| {
        for (yr, xr) in ys.chunks_mut(h).zip(xs.chunks(h)) {
            for (a, b) in yr.iter_mut().zip(xr) {
                *a += b;
            }
            let mean = lane_sum(yr, |v| v) / h as f32;
            let var = lane_sum(yr, |v| (v - mean) * (v - mean)) / h as f32;
            let inv = 1.0 / (var + n.eps).sqrt();
            for ((v, w), b) in yr.iter_mut().zip(&n.weight).zip(&n.bias) {
                *v = (*v - mean) * inv * w + b;
            }
        }
    });
}

/// `sum f(v)` in sixteen partial sums, so the loop vectorises (one running f32 sum does not).
#[inline(always)]
fn lane_sum(xs: &[f32], f: impl Fn(f32) -> f32) -> f32 {
    let mut acc = [0f32; 16];
    for c in xs.chunks(16) {
        for (a, v) in acc.iter_mut().zip(c) {
            *a += f(*v);
        }
    }
    acc.iter().sum()
}
