//! The int8 layer against f32 products, the kernel's pieces against their scalar forms.

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
        let cos = memory_core::embedding::cosine(&got[r * out..(r + 1) * out], &want);
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
#[cfg(target_arch = "x86_64")]
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
#[cfg(target_arch = "x86_64")]
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
