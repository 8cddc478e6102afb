//! What attention is given besides the layers' weights: each text's length when the mask is a prefix (the plain
//! path packs the real tokens), and MPNet's relative-position buckets.

use candle_core::{DType, Tensor};

/// Each row's length when the mask is ones then zeros (padding on the right, as `forward_padded` builds it);
/// `None` otherwise.
pub(super) fn prefix_lengths(mask: &Tensor) -> candle_core::Result<Option<Vec<usize>>> {
    let rows: Vec<Vec<u32>> = mask.to_dtype(DType::U32)?.to_vec2()?;
    let mut lens = Vec::with_capacity(rows.len());
    for r in rows {
        let len = r.iter().take_while(|m| **m != 0).count();
        if r[len..].iter().any(|m| *m != 0) {
            return Ok(None);
        }
        lens.push(len);
    }
    Ok(Some(lens))
}

/// MPNet's (T5's) bucket of each relative position `key - query`, `seq x seq` row-major: exact buckets for
/// small distances, logarithmic ones up to `max_distance`, one half of the buckets per direction.
pub(super) fn relative_buckets(seq: usize, buckets: usize, max_distance: usize) -> Vec<u32> {
    let half = (buckets / 2).max(1);
    let exact = (half / 2).max(1);
    let mut out = Vec::with_capacity(seq * seq);
    for q in 0..seq {
        for k in 0..seq {
            let n = q as i64 - k as i64; // -(key - query)
            let mut b = if n < 0 { half } else { 0 };
            let n = n.unsigned_abs() as usize;
            b += if n < exact {
                n
            } else {
                let log = ((n as f64 / exact as f64).ln() / (max_distance as f64 / exact as f64).ln() * (half - exact) as f64) as usize;
                (exact + log).min(half - 1)
            };
            out.push(b as u32);
        }
    }
    out
}
