//! The similarity an embedding model gives a query and text unrelated to it: the zero the vector leg of hybrid
//! ranking counts from ([`crate::ranking::vector_scores`]).
//!
//! Measured with probes: a few short texts, in English and Chinese, about things a memory seldom holds,
//! embedded as documents. The mean cosine of a query with them is the query's cosine with their centroid (the
//! probes' unit vectors averaged), so one vector per index is kept: in the index's meta, with the provider
//! fingerprint it was embedded with, written by a sync and read by searches.

use serde::{Deserialize, Serialize};

use super::{debug, store_handle, warn, Arc, ChunkStore, EmbeddingProvider, EmbeddingPurpose, IndexedBackend, Result};

/// A centroid an engine remembers: for which store handle and provider fingerprint, and whether that store holds
/// it (else the next sync stores it).
pub(super) struct Remembered {
    pub(super) handle: usize,
    pub(super) fingerprint: String,
    pub(super) centroid: std::sync::Arc<Vec<f32>>,
    pub(super) in_store: bool,
}

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

/// The query's mean cosine with the probes: the query's unit vector dotted with their centroid.
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

impl IndexedBackend {
    /// The probes' centroid for searches on `store` ([`unrelated`]): remembered, else read from the index's meta
    /// (a sync stores it), else embedded now and remembered for this process. `None` when the provider cannot
    /// embed the probes: vector scores then count as raw cosines.
    pub(super) async fn unrelated_centroid(
        &self,
        store: &Arc<dyn ChunkStore>,
        embedder: &Arc<dyn EmbeddingProvider>,
        bound: super::patience::Bound,
    ) -> Option<Arc<Vec<f32>>> {
        let handle = store_handle(store);
        let fingerprint = embedder.fingerprint();
        if let Some((c, _)) = self.remembered_centroid(handle, &fingerprint) {
            return Some(c);
        }
        let stored = match store.meta(META_KEY).await {
            Ok(m) => m.and_then(|m| decode(&m, &fingerprint)),
            Err(e) => {
                debug!(error = %e, "reading the unrelated-text centroid failed");
                None
            }
        };
        let (centroid, in_store) = match stored {
            Some(c) => (c, true),
            None => {
                // An index synced before probes existed: embed them now, and keep them in the index when its
                // writer lock is free at once (a search never waits for a writer), so later processes read them.
                let c = self.embed_unrelated_probes(embedder, bound).await?;
                let stored = match self.storage.writer_lock(false).await {
                    Ok(_writer) => match store.set_meta(META_KEY, &encode(&fingerprint, &c)).await {
                        Ok(()) => true,
                        Err(e) => {
                            debug!(error = %e, "storing the unrelated-text centroid failed; the next sync stores it");
                            false
                        }
                    },
                    Err(e) => {
                        debug!(error = %e, "index busy; the next sync stores the unrelated-text centroid");
                        false
                    }
                };
                (c, stored)
            }
        };
        Some(self.remember_centroid(handle, fingerprint, centroid, in_store))
    }

    /// The centroid remembered for the store `handle` and this provider fingerprint, and whether the store
    /// holds it.
    fn remembered_centroid(&self, handle: usize, fingerprint: &str) -> Option<(Arc<Vec<f32>>, bool)> {
        self.live.centroid(handle, fingerprint)
    }

    fn remember_centroid(&self, handle: usize, fingerprint: String, centroid: Vec<f32>, in_store: bool) -> Arc<Vec<f32>> {
        let centroid = Arc::new(centroid);
        self.live.remember_centroid(Remembered { handle, fingerprint, centroid: centroid.clone(), in_store });
        centroid
    }

    /// The probes' centroid, embedded within `bound` (not at all while a bounded wait finds the provider paused).
    pub(super) async fn embed_unrelated_probes(&self, embedder: &Arc<dyn EmbeddingProvider>, bound: super::patience::Bound) -> Option<Vec<f32>> {
        if bound.words_only() {
            return None;
        }
        if let Some(why) = bound.bounded().then(|| self.patience.paused()).flatten() {
            debug!(reason = %why, "the unrelated-text probes wait for the provider");
            return None;
        }
        let texts: Vec<String> = PROBES.iter().map(std::string::ToString::to_string).collect();
        match self.patience.call_that_can_wait(bound, embedder.embed(&texts, EmbeddingPurpose::Document)).await {
            Ok(vectors) => centroid(&vectors),
            Err(super::patience::Missed::TimedOut) => {
                debug!("the unrelated-text probes did not fit the wait; vector scores count from 0 until a later sync or search embeds them");
                None
            }
            Err(super::patience::Missed::Failed(e)) => {
                // A stand-in's reason was said once when it was built.
                if embedder.unavailable().is_some() {
                    debug!(error = %e, "embedding the unrelated-text probes failed; vector scores count from 0");
                } else {
                    warn!(error = %e, "embedding the unrelated-text probes failed; vector scores count from 0");
                }
                None
            }
        }
    }

    /// Store the probes' centroid in `target` once per provider (a sync's last step), so that searches read it
    /// instead of embedding the probes: carried over from `cache_from` (the old index, in a rebuild) when it has
    /// it, like the embedding cache, else embedded. What is stored is remembered, so a sync after every write
    /// (`memory serve`) does not read it back each time. A failure is logged: searches then embed the probes.
    pub(super) async fn record_unrelated_centroid(
        &self,
        target: &Arc<dyn ChunkStore>,
        cache_from: &Arc<dyn ChunkStore>,
        planned: Option<&str>,
        bound: super::patience::Bound,
    ) {
        let Some(embedder) = &self.embedder else { return };
        let fingerprint = embedder.fingerprint();
        if planned != Some(fingerprint.as_str()) {
            return;
        }
        let handle = store_handle(target);
        let remembered = self.remembered_centroid(handle, &fingerprint);
        if remembered.as_ref().is_some_and(|(_, in_store)| *in_store) {
            return;
        }
        // The stored centroid, when it counts for this provider.
        async fn stored(store: &Arc<dyn ChunkStore>, fingerprint: &str) -> Result<Option<Vec<f32>>> {
            Ok(store.meta(META_KEY).await?.and_then(|m| decode(&m, fingerprint)))
        }
        match stored(target, &fingerprint).await {
            Ok(Some(c)) => {
                self.remember_centroid(handle, fingerprint, c, true);
                return;
            }
            Ok(None) => {}
            Err(e) => {
                warn!(error = %e, "reading the unrelated-text centroid failed");
                return;
            }
        }
        let carried = if Arc::ptr_eq(target, cache_from) {
            None
        } else {
            stored(cache_from, &fingerprint).await.unwrap_or_else(|e| {
                debug!(error = %e, "the old index's unrelated-text centroid is unreadable; embedding the probes");
                None
            })
        };
        let centroid = match (carried, remembered) {
            (Some(c), _) => c,
            // Embedded by a search that found the index busy.
            (None, Some((c, _))) => c.as_ref().clone(),
            // Someone waits for this sync (a search, an append) and it holds the index's locks: the probes are
            // left to the search's own vector leg, which embeds them off the locks (and stores them when the
            // index is free), so searches sent together do not queue behind a slow provider here.
            (None, None) if matches!(bound, super::patience::Bound::Until(_)) => return,
            (None, None) => match self.embed_unrelated_probes(embedder, bound).await {
                Some(c) => c,
                None => return,
            },
        };
        match target.set_meta(META_KEY, &encode(&fingerprint, &centroid)).await {
            Ok(()) => {
                self.remember_centroid(handle, fingerprint, centroid, true);
            }
            Err(e) => warn!(error = %e, "storing the unrelated-text centroid failed"),
        }
    }
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
