//! An in-memory int8 copy of the index's vectors, scanned instead of sqlite-vec's scalar f32 loop.
//!
//! Why: sqlite-vec 0.1.6 answers a k-NN query by reading and comparing every stored f32 vector one float at a
//! time (~95 ms for 100k x 384 on this project's 2-core machine). The copy here is a quarter of the bytes, laid
//! out contiguously and compared with integer dot products the compiler vectorises (AVX2 when the CPU has it);
//! the best candidates of that approximate scan are then re-scored exactly from the f32 vectors in SQLite, so
//! the scores returned are sqlite-vec's.
//!
//! Each vector is normalised, then quantised symmetrically with its own scale (largest |component| -> 127):
//! cosine(q, v) ~= scale_q * scale_v * sum(q8_i * v8_i). The copy is derived data, never persisted: it is
//! built from `chunks_vec` on first use and kept in step by the change log (`vec_log`, see schema.rs).

use std::collections::HashMap;

/// Sources are kept as a byte per vector so that a source filter costs nothing in the scan.
pub(crate) type SourceTag = u8;

#[derive(Default)]
pub(crate) struct QuantizedVectors {
    dims: usize,
    rowids: Vec<i64>,
    sources: Vec<SourceTag>,
    scales: Vec<f32>,
    /// `rowids.len() * dims` codes, vector after vector.
    codes: Vec<i8>,
    slot_of: HashMap<i64, usize>,
}

/// Normalise and quantise `v`; `None` for a zero or non-finite vector (no cosine: it matches nothing, as in
/// sqlite-vec, whose cosine distance for a zero vector is NULL).
pub(crate) fn quantize(v: &[f32], out: &mut Vec<i8>) -> Option<f32> {
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    let max = v.iter().fold(0f32, |m, x| m.max(x.abs()));
    if !norm.is_finite() || norm == 0.0 || !max.is_finite() || max == 0.0 {
        return None;
    }
    // Components of the unit vector are x / norm; the largest maps to 127.
    let step = max / 127.0;
    out.clear();
    out.extend(v.iter().map(|x| (x / step).round().clamp(-127.0, 127.0) as i8));
    Some(step / norm)
}

impl QuantizedVectors {
    pub fn new(dims: usize) -> QuantizedVectors {
        QuantizedVectors { dims, ..Default::default() }
    }

    pub fn dims(&self) -> usize {
        self.dims
    }

    pub fn len(&self) -> usize {
        self.rowids.len()
    }

    /// Resident size of the copy, for status output.
    pub fn bytes(&self) -> usize {
        self.codes.len() + self.rowids.len() * (8 + 4 + 1) + self.slot_of.len() * 24
    }

    /// Add or replace the vector of `rowid`. Vectors of another width or without a direction are not kept.
    pub fn upsert(&mut self, rowid: i64, source: SourceTag, v: &[f32], scratch: &mut Vec<i8>) {
        if v.len() != self.dims {
            self.remove(rowid);
            return;
        }
        let Some(scale) = quantize(v, scratch) else {
            self.remove(rowid);
            return;
        };
        match self.slot_of.get(&rowid) {
            Some(&slot) => {
                self.sources[slot] = source;
                self.scales[slot] = scale;
                self.codes[slot * self.dims..(slot + 1) * self.dims].copy_from_slice(scratch);
            }
            None => {
                self.slot_of.insert(rowid, self.rowids.len());
                self.rowids.push(rowid);
                self.sources.push(source);
                self.scales.push(scale);
                self.codes.extend_from_slice(scratch);
            }
        }
    }

    /// Drop the vector of `rowid` (the last vector moves into its slot).
    pub fn remove(&mut self, rowid: i64) {
        let Some(slot) = self.slot_of.remove(&rowid) else { return };
        let last = self.rowids.len() - 1;
        if slot != last {
            let moved = self.rowids[last];
            self.rowids.swap(slot, last);
            self.sources.swap(slot, last);
            self.scales.swap(slot, last);
            let d = self.dims;
            self.codes.copy_within(last * d..(last + 1) * d, slot * d);
            self.slot_of.insert(moved, slot);
        }
        self.rowids.pop();
        self.sources.pop();
        self.scales.pop();
        self.codes.truncate(last * self.dims);
    }

    /// Rowids of the (up to) `k` vectors with the highest approximate cosine to `query`, best first, among
    /// vectors whose source is accepted by `keep`.
    pub fn nearest(&self, query: &[f32], k: usize, keep: impl Fn(SourceTag) -> bool) -> Vec<i64> {
        let mut q = Vec::with_capacity(self.dims);
        if self.dims == 0 || query.len() != self.dims || k == 0 || quantize(query, &mut q).is_none() {
            return Vec::new();
        }
        let mut dots = vec![0i32; self.rowids.len()];
        dot_all(&q, &self.codes, self.dims, &mut dots);
        // (approximate similarity, slot); the query's own scale is common to all and left out.
        let mut scored: Vec<(f32, usize)> = dots
            .iter()
            .enumerate()
            .filter(|(slot, _)| keep(self.sources[*slot]))
            .map(|(slot, d)| (*d as f32 * self.scales[slot], slot))
            .collect();
        let by_score = |a: &(f32, usize), b: &(f32, usize)| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1));
        if scored.len() > k {
            scored.select_nth_unstable_by(k - 1, by_score);
            scored.truncate(k);
        }
        scored.sort_unstable_by(by_score);
        scored.into_iter().map(|(_, slot)| self.rowids[slot]).collect()
    }
}

/// `out[i] = q . codes[i*dims..]` for every stored vector.
fn dot_all(q: &[i8], codes: &[i8], dims: usize, out: &mut [i32]) {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU supports AVX2 (checked just above); the function only compiles the portable loop
            // below with AVX2 enabled.
            unsafe { dot_all_avx2(q, codes, dims, out) };
            return;
        }
    }
    dot_all_portable(q, codes, dims, out);
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn dot_all_avx2(q: &[i8], codes: &[i8], dims: usize, out: &mut [i32]) {
    dot_all_portable(q, codes, dims, out)
}

#[inline(always)]
fn dot_all_portable(q: &[i8], codes: &[i8], dims: usize, out: &mut [i32]) {
    for (o, v) in out.iter_mut().zip(codes.chunks_exact(dims)) {
        *o = dot(q, v);
    }
}

/// i8 dot product in i16 products summed to i32: the shape LLVM turns into `pmaddwd` (SSE2/AVX2).
#[inline(always)]
fn dot(a: &[i8], b: &[i8]) -> i32 {
    let mut acc = [0i32; 16];
    let mut ca = a.chunks_exact(16);
    let mut cb = b.chunks_exact(16);
    for (x, y) in (&mut ca).zip(&mut cb) {
        for i in 0..16 {
            acc[i] += x[i] as i16 as i32 * y[i] as i16 as i32;
        }
    }
    let tail: i32 = ca.remainder().iter().zip(cb.remainder()).map(|(x, y)| *x as i32 * *y as i32).sum();
    acc.iter().sum::<i32>() + tail
}

/// Cosine similarity as sqlite-vec computes it (`distance_cosine_float`: sequential f32 sums, the division in
/// double, the distance rounded to f32), so a re-scored candidate gets exactly the score the exact scan gives
/// it. `None` when either vector has no direction (sqlite-vec's NULL distance).
pub(crate) fn exact_cosine(a: &[f32], b: &[f32]) -> Option<f64> {
    let (mut dot, mut aa, mut bb) = (0f32, 0f32, 0f32);
    for (x, y) in a.iter().zip(b) {
        dot += x * y;
        aa += x * x;
        bb += y * y;
    }
    let distance = (1.0 - (dot as f64 / ((aa as f64).sqrt() * (bb as f64).sqrt()))) as f32;
    distance.is_finite().then_some(1.0 - distance as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seeded(n: usize, dims: usize, mut state: u64) -> Vec<Vec<f32>> {
        (0..n)
            .map(|_| {
                (0..dims)
                    .map(|_| {
                        state ^= state << 13;
                        state ^= state >> 7;
                        state ^= state << 17;
                        (state >> 40) as f32 / (1u64 << 24) as f32 - 0.5
                    })
                    .collect()
            })
            .collect()
    }

    #[test]
    fn dot_matches_the_plain_sum_at_every_width() {
        for dims in [1, 15, 16, 17, 384, 385] {
            let v = seeded(2, dims, 7 + dims as u64);
            let (mut a, mut b) = (Vec::new(), Vec::new());
            quantize(&v[0], &mut a).unwrap();
            quantize(&v[1], &mut b).unwrap();
            let plain: i32 = a.iter().zip(&b).map(|(x, y)| *x as i32 * *y as i32).sum();
            assert_eq!(dot(&a, &b), plain);
            let mut out = [0i32; 1];
            dot_all(&a, &b, dims, &mut out);
            assert_eq!(out[0], plain);
        }
    }

    #[test]
    fn approximate_ranking_finds_the_exact_nearest() {
        let dims = 64;
        let data = seeded(2000, dims, 99);
        let mut qv = QuantizedVectors::new(dims);
        let mut scratch = Vec::new();
        for (i, v) in data.iter().enumerate() {
            qv.upsert(i as i64, 0, v, &mut scratch);
        }
        for q in seeded(20, dims, 5) {
            let mut exact: Vec<(f64, i64)> = data.iter().enumerate().map(|(i, v)| (exact_cosine(&q, v).unwrap(), i as i64)).collect();
            exact.sort_by(|a, b| b.0.total_cmp(&a.0));
            let approx = qv.nearest(&q, 50, |_| true);
            for (_, id) in exact.iter().take(5) {
                assert!(approx.contains(id), "exact top-5 {id} missing from the approximate top-50");
            }
        }
    }

    #[test]
    fn removal_keeps_the_other_vectors_findable() {
        let dims = 8;
        let data = seeded(10, dims, 3);
        let mut qv = QuantizedVectors::new(dims);
        let mut s = Vec::new();
        for (i, v) in data.iter().enumerate() {
            qv.upsert(i as i64 + 100, (i % 2) as u8, v, &mut s);
        }
        qv.remove(100);
        qv.remove(105);
        qv.remove(4242);
        assert_eq!(qv.len(), 8);
        for (i, v) in data.iter().enumerate() {
            let first = qv.nearest(v, 1, |_| true);
            if i == 0 || i == 5 {
                assert!(!first.contains(&(i as i64 + 100)));
            } else {
                assert_eq!(first, vec![i as i64 + 100]);
            }
        }
        // The source filter: only odd-source vectors.
        assert!(qv.nearest(&data[2], 10, |s| s == 1).iter().all(|r| (r - 100) % 2 == 1));
        // Zero, non-finite and wrong-width vectors are never stored or matched.
        qv.upsert(7, 0, &[0.0; 8], &mut s);
        qv.upsert(8, 0, &[f32::NAN; 8], &mut s);
        qv.upsert(9, 0, &[1.0; 3], &mut s);
        assert_eq!(qv.len(), 8);
        assert!(qv.nearest(&[0.0; 8], 5, |_| true).is_empty());
        assert!(qv.nearest(&[1.0; 3], 5, |_| true).is_empty());
    }
}
