//! The similarity an embedding model gives a query and text unrelated to it: the zero the vector leg of hybrid
//! ranking counts from ([`crate::ranking::vector_scores`]), and the bar its best candidate has to clear for the leg
//! to count at all ([`crate::ranking::vector_leg_tells`]).
//!
//! Measured with probes: a few short texts, in English and Chinese, about things a memory seldom holds,
//! embedded as documents. The floor is the query's mean cosine with them (its cosine with their centroid, the
//! probes' unit vectors averaged); the bar is its cosine with the probe most like it. The probes' unit vectors are
//! kept in the index's meta, with the provider fingerprint they were embedded with, written by a sync and read by
//! searches.

use serde::{Deserialize, Serialize};

use super::{debug, store_handle, warn, Arc, ChunkStore, EmbeddingProvider, EmbeddingPurpose, IndexedBackend, Result};

/// The probes an engine remembers: for which store handle and provider fingerprint, and whether that store holds
/// them (else the next sync stores them).
pub(super) struct Remembered {
    pub(super) handle: usize,
    pub(super) fingerprint: String,
    pub(super) probes: std::sync::Arc<Unrelated>,
    pub(super) in_store: bool,
}

/// Meta key of the probes' vectors.
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
/// Version 2 keeps every probe's vector (version 1 kept only their centroid).
const PROBES_VERSION: u32 = 2;

#[derive(Serialize, Deserialize)]
struct Stored {
    version: u32,
    fingerprint: String,
    probes: Vec<Vec<f32>>,
}

/// The probes as one provider embeds them: each one's unit vector, and their centroid.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Unrelated {
    probes: Vec<Vec<f32>>,
    centroid: Vec<f32>,
}

/// `v` scaled to unit length; `None` for a zero, non-finite or empty vector.
fn unit(v: &[f32]) -> Option<Vec<f32>> {
    let norm = v.iter().map(|x| f64::from(*x) * f64::from(*x)).sum::<f64>().sqrt();
    (!v.is_empty() && norm.is_finite() && norm > 0.0).then(|| v.iter().map(|x| (f64::from(*x) / norm) as f32).collect())
}

impl Unrelated {
    /// The probes' vectors as the provider returned them (one per probe). `None` when there is no usable vector;
    /// vectors of another width than the first, or of no length, are left out.
    pub(super) fn of(vectors: &[Vec<f32>]) -> Option<Self> {
        let dims = vectors.first()?.len();
        Self::of_units(vectors.iter().filter(|v| v.len() == dims).filter_map(|v| unit(v)).collect())
    }

    /// From unit vectors of one width, as they are (read back from the index, they are not scaled again: the
    /// floor a search reads is the one the search that stored them read).
    fn of_units(probes: Vec<Vec<f32>>) -> Option<Self> {
        let dims = probes.first()?.len();
        if dims == 0 || probes.iter().any(|p| p.len() != dims || p.iter().any(|x| !x.is_finite())) {
            return None;
        }
        let n = probes.len() as f64;
        let centroid = (0..dims).map(|i| (probes.iter().map(|p| f64::from(p[i])).sum::<f64>() / n) as f32).collect();
        Some(Self { probes, centroid })
    }

    /// The query's mean cosine with the probes: the query's unit vector dotted with their centroid. `None` for a
    /// query of another width or of no length.
    pub(super) fn floor(&self, query: &[f32]) -> Option<f64> {
        let q = unit(query).filter(|q| q.len() == self.centroid.len())?;
        Some(dot(&q, &self.centroid)).filter(|f| f.is_finite())
    }

    /// The query's cosine with the probe most like it: how like the query text about something else can be.
    pub(super) fn nearest(&self, query: &[f32]) -> Option<f64> {
        let q = unit(query).filter(|q| q.len() == self.centroid.len())?;
        self.probes.iter().map(|p| dot(&q, p)).filter(|c| c.is_finite()).reduce(f64::max)
    }
}

fn dot(a: &[f32], b: &[f32]) -> f64 {
    a.iter().zip(b).map(|(x, y)| f64::from(*x) * f64::from(*y)).sum()
}

pub(super) fn encode(fingerprint: &str, probes: &Unrelated) -> String {
    serde_json::to_string(&Stored { version: PROBES_VERSION, fingerprint: fingerprint.to_string(), probes: probes.probes.clone() })
        .expect("a vector of floats serialises")
}

/// The stored probes, if they were measured with these probes and this provider fingerprint.
pub(super) fn decode(meta: &str, fingerprint: &str) -> Option<Unrelated> {
    let s: Stored = serde_json::from_str(meta).ok()?;
    let usable = s.version == PROBES_VERSION && s.fingerprint == fingerprint && s.probes.len() == PROBES.len();
    usable.then(|| Unrelated::of_units(s.probes)).flatten()
}

impl IndexedBackend {
    /// The probes for searches on `store` ([`unrelated`](self)): remembered, else read from the index's meta
    /// (a sync stores it), else embedded now and remembered for this process. `None` when the provider cannot
    /// embed the probes: vector scores then count as raw cosines.
    pub(super) async fn unrelated_probes(
        &self,
        store: &Arc<dyn ChunkStore>,
        embedder: &Arc<dyn EmbeddingProvider>,
        bound: super::patience::Bound,
    ) -> Option<Arc<Unrelated>> {
        let handle = store_handle(store);
        let fingerprint = embedder.fingerprint();
        if let Some((c, _)) = self.remembered_probes(handle, &fingerprint) {
            return Some(c);
        }
        let stored = match store.meta(META_KEY).await {
            Ok(m) => m.and_then(|m| decode(&m, &fingerprint)),
            Err(e) => {
                debug!(error = %e, "reading the unrelated-text probes failed");
                None
            }
        };
        let (probes, in_store) = match stored {
            Some(c) => (c, true),
            None => {
                // An index synced before probes existed: embed them now, and keep them in the index when its
                // writer lock is free at once (a search never waits for a writer), so later processes read them.
                let c = self.embed_unrelated_probes(embedder, bound).await?;
                let stored = match self.storage.writer_lock(false).await {
                    Ok(_writer) => match store.set_meta(META_KEY, &encode(&fingerprint, &c)).await {
                        Ok(()) => true,
                        Err(e) => {
                            debug!(error = %e, "storing the unrelated-text probes failed; the next sync stores them");
                            false
                        }
                    },
                    Err(e) => {
                        debug!(error = %e, "index busy; the next sync stores the unrelated-text probes");
                        false
                    }
                };
                (c, stored)
            }
        };
        Some(self.remember_probes(handle, fingerprint, probes, in_store))
    }

    /// The probes remembered for the store `handle` and this provider fingerprint, and whether the store
    /// holds it.
    fn remembered_probes(&self, handle: usize, fingerprint: &str) -> Option<(Arc<Unrelated>, bool)> {
        self.live.probes(handle, fingerprint)
    }

    fn remember_probes(&self, handle: usize, fingerprint: String, probes: Unrelated, in_store: bool) -> Arc<Unrelated> {
        let probes = Arc::new(probes);
        self.live.remember_probes(Remembered { handle, fingerprint, probes: probes.clone(), in_store });
        probes
    }

    /// The probes, embedded within `bound` (not at all while a bounded wait finds the provider paused).
    pub(super) async fn embed_unrelated_probes(&self, embedder: &Arc<dyn EmbeddingProvider>, bound: super::patience::Bound) -> Option<Unrelated> {
        if bound.words_only() {
            return None;
        }
        if let Some(why) = bound.bounded().then(|| self.patience.paused()).flatten() {
            debug!(reason = %why, "the unrelated-text probes wait for the provider");
            return None;
        }
        let texts: Vec<String> = PROBES.iter().map(std::string::ToString::to_string).collect();
        match self.patience.call_that_can_wait(bound, embedder.embed(&texts, EmbeddingPurpose::Document)).await {
            Ok(vectors) => Unrelated::of(&vectors),
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

    /// Store the probes' vectors in `target` once per provider (a sync's last step), so that searches read it
    /// instead of embedding the probes: carried over from `cache_from` (the old index, in a rebuild) when it has
    /// it, like the embedding cache, else embedded. What is stored is remembered, so a sync after every write
    /// (`memory serve`) does not read it back each time. A failure is logged: searches then embed the probes.
    pub(super) async fn record_unrelated_probes(
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
        let remembered = self.remembered_probes(handle, &fingerprint);
        if remembered.as_ref().is_some_and(|(_, in_store)| *in_store) {
            return;
        }
        // The stored probes, when they count for this provider.
        async fn stored(store: &Arc<dyn ChunkStore>, fingerprint: &str) -> Result<Option<Unrelated>> {
            Ok(store.meta(META_KEY).await?.and_then(|m| decode(&m, fingerprint)))
        }
        match stored(target, &fingerprint).await {
            Ok(Some(c)) => {
                self.remember_probes(handle, fingerprint, c, true);
                return;
            }
            Ok(None) => {}
            Err(e) => {
                warn!(error = %e, "reading the unrelated-text probes failed");
                return;
            }
        }
        let carried = if Arc::ptr_eq(target, cache_from) {
            None
        } else {
            stored(cache_from, &fingerprint).await.unwrap_or_else(|e| {
                debug!(error = %e, "the old index's unrelated-text probes are unreadable; embedding them");
                None
            })
        };
        let probes = match (carried, remembered) {
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
        match target.set_meta(META_KEY, &encode(&fingerprint, &probes)).await {
            Ok(()) => {
                self.remember_probes(handle, fingerprint, probes, true);
            }
            Err(e) => warn!(error = %e, "storing the unrelated-text probes failed"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_floor_is_the_mean_cosine_with_the_probes_and_the_nearest_the_closest() {
        let probes = Unrelated::of(&[vec![1.0, 0.0, 0.0], vec![0.0, 2.0, 0.0]]).unwrap();
        let q = [3.0f32, 0.0, 4.0];
        // cos(q, p1) = 0.6, cos(q, p2) = 0: mean 0.3, nearest 0.6.
        assert!((probes.floor(&q).unwrap() - 0.3).abs() < 1e-6);
        assert!((probes.nearest(&q).unwrap() - 0.6).abs() < 1e-6);
        assert_eq!(probes.floor(&[1.0, 0.0]), None, "another width is no floor");
        assert_eq!(probes.nearest(&[1.0, 0.0]), None);
        assert_eq!(probes.floor(&[0.0, 0.0, 0.0]), None);
        assert_eq!(Unrelated::of(&[vec![0.0, 0.0]]), None);
    }

    #[test]
    fn stored_probes_count_only_for_their_provider_and_version() {
        let vectors: Vec<Vec<f32>> = (0..PROBES.len()).map(|i| vec![i as f32 + 1.0, 1.0]).collect();
        let probes = Unrelated::of(&vectors).unwrap();
        let meta = encode("local:model-a", &probes);
        assert_eq!(decode(&meta, "local:model-a"), Some(probes));
        assert_eq!(decode(&meta, "local:model-b"), None);
        assert_eq!(decode("not json", "local:model-a"), None);
        // What version 1 stored (the centroid alone) is measured again.
        assert_eq!(decode(r#"{"version":1,"fingerprint":"local:model-a","centroid":[0.5,0.25]}"#, "local:model-a"), None);
    }
}
