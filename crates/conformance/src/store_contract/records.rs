//! The checks of what a store keeps beside the chunks: the index identity (and an unreadable one), the
//! metadata and the embedding cache.

use std::collections::{BTreeSet, HashMap};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use memory_core::store::{EmbeddingCacheKey, IndexStorage};
use memory_core::ErrorKind;

use super::fixtures::{axis, identity};
use super::{step, CheckResult, StoreHarness, Verdict};

/// A new store has no identity, files, chunks or metadata; a written identity reads back equal.
pub async fn new_store_is_empty_and_identity_round_trips(_: &dyn StoreHarness, storage: Arc<dyn IndexStorage>, _: PathBuf) -> CheckResult {
    let store = step("open_live", storage.open_live().await)?;
    ensure!(step("identity()", store.identity().await)?.is_none(), "a new store has an identity");
    ensure!(step("counts()", store.counts().await)? == (0, 0), "a new store is not empty");
    ensure!(step("files()", store.files().await)?.is_empty(), "a new store lists files");
    ensure!(step("meta()", store.meta("lastSync").await)?.is_none(), "a new store has metadata");
    let id = identity(Some(8));
    step("set_identity", store.set_identity(&id).await)?;
    ensure!(step("identity()", store.identity().await)? == Some(id.clone()), "the identity does not read back equal");
    let again = step("open_live again", storage.open_live().await)?;
    ensure!(step("identity()", again.identity().await)? == Some(id), "another live handle does not see the identity");
    Ok(Verdict::Passed)
}

/// The cache answers only for its own key and drops the oldest entries beyond `max_entries`.
pub async fn embedding_cache_is_keyed_and_pruned_oldest_first(_: &dyn StoreHarness, storage: Arc<dyn IndexStorage>, _: PathBuf) -> CheckResult {
    let store = step("open_live", storage.open_live().await)?;
    let key = EmbeddingCacheKey { provider: "p".into(), model: "m".into(), fingerprint: "f1".into() };
    let other = EmbeddingCacheKey { fingerprint: "f2".into(), ..key.clone() };
    let hashes: Vec<String> = ["h1", "h2", "h3"].iter().map(std::string::ToString::to_string).collect();
    // One entry per call, a few milliseconds apart: "oldest" is then unambiguous for every store.
    for (i, h) in hashes.iter().enumerate() {
        step("cache_embeddings()", store.cache_embeddings(&key, &[(h.clone(), axis(i, 4))], if i < 2 { 10 } else { 2 }).await)?;
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let got = step("cached_embeddings()", store.cached_embeddings(&key, &hashes).await)?;
    let want: HashMap<String, Vec<f32>> = [("h2".to_string(), axis(1, 4)), ("h3".to_string(), axis(2, 4))].into_iter().collect();
    ensure!(got == want, "after pruning to 2 entries expected h2 and h3, got {:?}", got.keys().collect::<BTreeSet<_>>());
    ensure!(
        step("cached_embeddings(other key)", store.cached_embeddings(&other, &hashes).await)?.is_empty(),
        "the cache answered for another fingerprint"
    );
    Ok(Verdict::Passed)
}

/// Metadata reads back, and a second write of a key replaces the first.
pub async fn meta_round_trips(_: &dyn StoreHarness, storage: Arc<dyn IndexStorage>, _: PathBuf) -> CheckResult {
    let store = step("open_live", storage.open_live().await)?;
    step("set_meta()", store.set_meta("lastSync", "1").await)?;
    step("set_meta() again", store.set_meta("lastSync", "2").await)?;
    ensure!(step("meta()", store.meta("lastSync").await)?.as_deref() == Some("2"), "meta did not read back the last value");
    ensure!(step("meta(unknown)", store.meta("nothing").await)?.is_none(), "an unknown key has a value");
    Ok(Verdict::Passed)
}

/// A stored identity that cannot be read is `CorruptIndex`, never `None` (see [`ChunkStore::identity`]).
pub async fn unreadable_identity_is_a_corrupt_index(h: &dyn StoreHarness, storage: Arc<dyn IndexStorage>, dir: PathBuf) -> CheckResult {
    let store = step("open_live", storage.open_live().await)?;
    step("set_identity", store.set_identity(&identity(None)).await)?;
    match h.write_unreadable_identity(&dir, &*store).await {
        None => return Ok(Verdict::Skipped("the store keeps its identity typed; it cannot be unreadable".into())),
        Some(r) => step("write an unreadable identity", r)?,
    }
    step("close", store.close().await)?;
    let reopened = step("open_live again", storage.open_live().await)?;
    match reopened.identity().await {
        Err(e) if e.kind() == ErrorKind::CorruptIndex => Ok(Verdict::Passed),
        other => Err(format!("an unreadable identity must be CorruptIndex, got {other:?}")),
    }
}
