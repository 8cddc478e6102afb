//! An in-memory int8 copy of the index's vectors, scanned instead of sqlite-vec's scalar f32 loop.
//!
//! Why: sqlite-vec 0.1.6 answers a k-NN query by reading and comparing every stored f32 vector one float at a
//! time, so a query costs time in proportion to every float of the index. The copy here is a quarter of the
//! bytes, laid out contiguously and compared with integer dot products (an explicit AVX2 kernel when the CPU has it, a loop
//! the compiler vectorises otherwise), on every core for a large copy: the scan is bound by memory bandwidth,
//! which one core cannot use up. The best candidates of that approximate scan are then re-scored exactly from
//! the f32 vectors in SQLite, so the scores returned are sqlite-vec's.
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
    pub fn nearest(&self, query: &[f32], k: usize, keep: impl Fn(SourceTag) -> bool + Sync) -> Vec<i64> {
        self.nearest_on(scan_threads(self.len()), query, k, keep)
    }

    /// [`Self::nearest`] with the scan split over `threads` threads.
    fn nearest_on(&self, threads: usize, query: &[f32], k: usize, keep: impl Fn(SourceTag) -> bool + Sync) -> Vec<i64> {
        let mut q = Vec::with_capacity(self.dims);
        if self.dims == 0 || query.len() != self.dims || k == 0 || quantize(query, &mut q).is_none() {
            return Vec::new();
        }
        let n = self.len();
        let best = if threads == 1 {
            self.scan(&q, 0..n, k, &keep)
        } else {
            // The scan is bound by memory bandwidth, which one core cannot use up: each thread takes a run of slots.
            let per = n.div_ceil(threads);
            let parts: Vec<TopK> = std::thread::scope(|s| {
                let (q, keep) = (&q, &keep);
                let handles: Vec<_> = (0..threads).map(|t| s.spawn(move || self.scan(q, t * per..((t + 1) * per).min(n), k, keep))).collect();
                handles.into_iter().map(|h| h.join().expect("vector scan thread panicked")).collect()
            });
            let mut all = TopK::new(k);
            for part in parts {
                for (score, slot) in part.into_sorted() {
                    all.offer(score, slot);
                }
            }
            all
        };
        best.into_sorted().into_iter().map(|(_, slot)| self.rowids[slot]).collect()
    }

    /// The best `k` of the slots in `range`.
    fn scan(&self, q: &[i8], range: std::ops::Range<usize>, k: usize, keep: &(impl Fn(SourceTag) -> bool + Sync)) -> TopK {
        let mut best = TopK::new(k);
        let mut dots = vec![0i32; SCAN_BLOCK];
        let mut first = range.start;
        while first < range.end {
            let end = (first + SCAN_BLOCK).min(range.end);
            let dots = &mut dots[..end - first];
            dot_all(q, &self.codes[first * self.dims..end * self.dims], self.dims, dots);
            for (i, d) in dots.iter().enumerate() {
                let slot = first + i;
                if keep(self.sources[slot]) {
                    // The query's own scale is common to all and left out.
                    best.offer(*d as f32 * self.scales[slot], slot);
                }
            }
            first = end;
        }
        best
    }
}

/// Below this many vectors one core scans the copy quickly and a thread would cost more than it saves.
const PARALLEL_SCAN_MIN: usize = 32 * 1024;

/// Threads for a scan of `n` vectors: one per core, at most 4 (memory bandwidth is shared beyond that).
fn scan_threads(n: usize) -> usize {
    if n < PARALLEL_SCAN_MIN {
        return 1;
    }
    std::thread::available_parallelism().map_or(1, std::num::NonZero::get).clamp(1, 4).min(n / (PARALLEL_SCAN_MIN / 2))
}

/// Vectors scanned per block: their dot products (4 KiB) stay in the L1 cache until ranked.
const SCAN_BLOCK: usize = 1024;

/// The `k` best (score, slot) pairs of a scan, highest score first, the lower slot first on a tie: candidates
/// are buffered up to `2k` and cut back to the best `k`, whose lowest score then bars the rest.
struct TopK {
    k: usize,
    kept: Vec<(f32, usize)>,
    bar: f32,
}

fn best_first(a: &(f32, usize), b: &(f32, usize)) -> std::cmp::Ordering {
    b.0.total_cmp(&a.0).then(a.1.cmp(&b.1))
}

impl TopK {
    fn new(k: usize) -> TopK {
        TopK { k, kept: Vec::with_capacity(2 * k), bar: f32::NEG_INFINITY }
    }

    /// Among equal scores, slots are offered in increasing order (a scan's slots, then runs of higher slots,
    /// each best first), so one scoring exactly the bar loses the tie to those kept and is not kept.
    #[inline]
    fn offer(&mut self, score: f32, slot: usize) {
        if score > self.bar {
            self.kept.push((score, slot));
            if self.kept.len() == 2 * self.k {
                self.cut();
            }
        }
    }

    fn cut(&mut self) {
        self.kept.select_nth_unstable_by(self.k - 1, best_first);
        self.kept.truncate(self.k);
        // The k-th best (the worst kept) is at k - 1 after the selection.
        self.bar = self.kept[self.k - 1].0;
    }

    fn into_sorted(mut self) -> Vec<(f32, usize)> {
        if self.kept.len() > self.k {
            self.cut();
        }
        self.kept.sort_unstable_by(best_first);
        self.kept
    }
}

/// `out[i] = q . codes[i*dims..]` for every stored vector.
fn dot_all(q: &[i8], codes: &[i8], dims: usize, out: &mut [i32]) {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU supports AVX2 (checked just above).
            unsafe { avx2::dot_all(q, codes, dims, out) };
            return;
        }
    }
    dot_all_portable(q, codes, dims, out);
}

fn dot_all_portable(q: &[i8], codes: &[i8], dims: usize, out: &mut [i32]) {
    for (o, v) in out.iter_mut().zip(codes.chunks_exact(dims)) {
        *o = dot(q, v);
    }
}

/// i8 dot product in i16 products summed to i32: the shape LLVM turns into `pmaddwd` (SSE2).
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

/// The AVX2 scan: 32 codes per instruction. `vpmaddubsw` multiplies unsigned by signed bytes, so the query's
/// magnitudes are multiplied by the stored codes carrying the query's signs (`vpsignb`); two products summed
/// stay inside i16 because codes are never -128 (`quantize` clamps to +-127): 2 x 127 x 127 = 32,258.
#[cfg(target_arch = "x86_64")]
mod avx2 {
    use std::arch::x86_64::*;

    /// # Safety
    /// The CPU must support AVX2.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn dot_all(q: &[i8], codes: &[i8], dims: usize, out: &mut [i32]) {
        let lanes = dims / 32;
        let load = |p: &[i8], i: usize| unsafe { _mm256_loadu_si256(p.as_ptr().add(i * 32) as *const __m256i) };
        let signs: Vec<__m256i> = (0..lanes).map(|i| load(q, i)).collect();
        let magnitudes: Vec<__m256i> = signs.iter().map(|s| _mm256_abs_epi8(*s)).collect();
        let ones = _mm256_set1_epi16(1);
        for (o, v) in out.iter_mut().zip(codes.chunks_exact(dims)) {
            let mut acc = _mm256_setzero_si256();
            for i in 0..lanes {
                let signed = _mm256_sign_epi8(load(v, i), signs[i]);
                let pairs = _mm256_maddubs_epi16(magnitudes[i], signed);
                acc = _mm256_add_epi32(acc, _mm256_madd_epi16(pairs, ones));
            }
            let half = _mm_add_epi32(_mm256_castsi256_si128(acc), _mm256_extracti128_si256(acc, 1));
            let quarter = _mm_add_epi32(half, _mm_unpackhi_epi64(half, half));
            let sum = _mm_cvtsi128_si32(_mm_add_epi32(quarter, _mm_shuffle_epi32(quarter, 1)));
            let tail: i32 = q[lanes * 32..].iter().zip(&v[lanes * 32..]).map(|(a, b)| *a as i32 * *b as i32).sum();
            *o = sum + tail;
        }
    }
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

    fn plain_dot(a: &[i8], b: &[i8]) -> i32 {
        a.iter().zip(b).map(|(x, y)| *x as i32 * *y as i32).sum()
    }

    #[test]
    fn dot_matches_the_plain_sum_at_every_width() {
        for dims in [1, 15, 16, 17, 31, 32, 33, 64, 383, 384, 385, 768] {
            let data = seeded(9, dims, 7 + dims as u64);
            let q = {
                let mut q = Vec::new();
                quantize(&data[0], &mut q).unwrap();
                q
            };
            let mut codes = Vec::new();
            let mut scratch = Vec::new();
            for v in &data[1..] {
                quantize(v, &mut scratch).unwrap();
                codes.extend_from_slice(&scratch);
            }
            // The extremes: every product at +-127 x 127, where an i16 pair sum would overflow if codes were -128.
            codes.extend(std::iter::repeat_n(127i8, dims));
            codes.extend(q.iter().map(|x| if *x < 0 { 127 } else { -127 }));
            let n = codes.len() / dims;
            let mut out = vec![0i32; n];
            dot_all(&q, &codes, dims, &mut out);
            let mut portable = vec![0i32; n];
            dot_all_portable(&q, &codes, dims, &mut portable);
            for (i, v) in codes.chunks_exact(dims).enumerate() {
                let plain = plain_dot(&q, v);
                assert_eq!(out[i], plain, "dims {dims}, vector {i}");
                assert_eq!(portable[i], plain, "dims {dims}, vector {i} (portable)");
            }
        }
    }

    #[test]
    fn the_scan_keeps_what_a_full_sort_keeps() {
        // Many equal scores (repeated vectors) across scan blocks and, in the larger copy, across scan threads;
        // k below, at and above the count.
        for (n, dims) in [(3 * SCAN_BLOCK + 17, 40), (2 * PARALLEL_SCAN_MIN + 5, 4)] {
            let base = seeded(50, dims, 11);
            let mut qv = QuantizedVectors::new(dims);
            let mut s = Vec::new();
            for i in 0..n {
                qv.upsert(i as i64, (i % 3 == 0) as u8, &base[i % base.len()], &mut s);
            }
            let mut codes_q = Vec::new();
            for q in seeded(3, dims, 12) {
                quantize(&q, &mut codes_q).unwrap();
                for k in [1, 7, 64, 500, n, n + 5] {
                    for only in [None, Some(1u8)] {
                        let keep = |t: SourceTag| only.is_none_or(|o| o == t);
                        let mut all: Vec<(f32, usize)> = (0..n)
                            .filter(|slot| keep(qv.sources[*slot]))
                            .map(|slot| (plain_dot(&codes_q, &qv.codes[slot * dims..(slot + 1) * dims]) as f32 * qv.scales[slot], slot))
                            .collect();
                        all.sort_by(best_first);
                        all.truncate(k);
                        let want: Vec<i64> = all.iter().map(|(_, slot)| qv.rowids[*slot]).collect();
                        assert_eq!(qv.nearest(&q, k, keep), want, "n {n}, k {k}, filter {only:?}");
                        for threads in [2, 3] {
                            assert_eq!(qv.nearest_on(threads, &q, k, keep), want, "n {n}, k {k}, filter {only:?}, {threads} threads");
                        }
                    }
                }
            }
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
