//! The similarity an embedding model gives a query and text unrelated to it: the zero the vector leg of hybrid
//! ranking counts from ([`crate::ranking::vector_scores`]).
//!
//! Measured with probes: a few short texts, in English and Chinese, about things a memory seldom holds,
//! embedded as documents. The mean cosine of a query with them is the query's cosine with their centroid (the
//! probes' unit vectors averaged), so one vector per index is kept: in the index's meta, with the provider
//! fingerprint it was embedded with, written by a sync and read by searches.

use serde::{Deserialize, Serialize};

/// Meta key of the probes' centroid.
pub(super) const META_KEY: &str = "unrelatedCentroid";

/// Unrelated to each other and to the work an agent's memory is about. Changing them changes every hybrid
/// score a little: the fingerprint check below re-measures when the provider changes, not when these do, so
/// [`PROBES_VERSION`] is part of what is stored.
pub(super) const PROBES: &[&str] = &[
    "The recipe needs two cups of flour and a pinch of salt.",
    "The train to the coast leaves every hour from platform four.",
    "Sunflowers turn their heads to follow the morning sun.",
    "The museum is closed on public holidays.",
    "He tuned the old guitar before the evening concert.",
    "Heavy rain is expected in the north this weekend.",
    "A goalkeeper saved the penalty in the final minute.",
    "The lighthouse keeper painted the railings white.",
    "今天天气很好，我们去公园散步吧。",
    "这家小店的牛肉面非常好吃。",
    "火车每小时从四号站台出发一次。",
    "小猫整个下午都在窗台上晒太阳。",
];
const PROBES_VERSION: u32 = 1;

#[derive(Serialize, Deserialize)]
struct Stored {
    version: u32,
    fingerprint: String,
    centroid: Vec<f32>,
}

/// The mean of the probes' vectors, each scaled to unit length. `None` when there is no usable vector.
pub(super) fn centroid(vectors: &[Vec<f32>]) -> Option<Vec<f32>> {
    let dims = vectors.first()?.len();
    let mut sum = vec![0f64; dims];
    let mut n = 0usize;
    for v in vectors.iter().filter(|v| v.len() == dims) {
        let norm = v.iter().map(|x| f64::from(*x) * f64::from(*x)).sum::<f64>().sqrt();
        if !norm.is_finite() || norm == 0.0 {
            continue;
        }
        for (s, x) in sum.iter_mut().zip(v) {
            *s += f64::from(*x) / norm;
        }
        n += 1;
    }
    (n > 0 && dims > 0).then(|| sum.iter().map(|s| (s / n as f64) as f32).collect())
}

/// The query's mean cosine with the probes: its cosine-weighted projection on their centroid.
pub(super) fn floor(query: &[f32], centroid: &[f32]) -> Option<f64> {
    if query.len() != centroid.len() {
        return None;
    }
    let norm = query.iter().map(|x| f64::from(*x) * f64::from(*x)).sum::<f64>().sqrt();
    if !norm.is_finite() || norm == 0.0 {
        return None;
    }
    let dot: f64 = query.iter().zip(centroid).map(|(q, c)| f64::from(*q) * f64::from(*c)).sum();
    Some(dot / norm).filter(|f| f.is_finite())
}

pub(super) fn encode(fingerprint: &str, centroid: &[f32]) -> String {
    serde_json::to_string(&Stored { version: PROBES_VERSION, fingerprint: fingerprint.to_string(), centroid: centroid.to_vec() })
        .expect("a vector of floats serialises")
}

/// The stored centroid, if it was measured with these probes and this provider fingerprint.
pub(super) fn decode(meta: &str, fingerprint: &str) -> Option<Vec<f32>> {
    let s: Stored = serde_json::from_str(meta).ok()?;
    (s.version == PROBES_VERSION && s.fingerprint == fingerprint && s.centroid.iter().all(|x| x.is_finite())).then_some(s.centroid)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_floor_is_the_mean_cosine_with_the_probes() {
        let probes = vec![vec![1.0, 0.0, 0.0], vec![0.0, 2.0, 0.0]];
        let c = centroid(&probes).unwrap();
        let q = [3.0f32, 0.0, 4.0];
        // cos(q, p1) = 0.6, cos(q, p2) = 0: mean 0.3.
        assert!((floor(&q, &c).unwrap() - 0.3).abs() < 1e-6);
        assert_eq!(floor(&[1.0, 0.0], &c), None, "another width is no floor");
        assert_eq!(floor(&[0.0, 0.0, 0.0], &c), None);
        assert_eq!(centroid(&[vec![0.0, 0.0]]), None);
    }

    #[test]
    fn a_stored_centroid_counts_only_for_its_provider() {
        let meta = encode("local:model-a", &[0.5, 0.25]);
        assert_eq!(decode(&meta, "local:model-a"), Some(vec![0.5, 0.25]));
        assert_eq!(decode(&meta, "local:model-b"), None);
        assert_eq!(decode("not json", "local:model-a"), None);
    }
}
