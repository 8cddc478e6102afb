//! What the engine reports about its index (`status`), and the recovery of a live index found corrupt.

use super::*;

/// `status`'s line on files waiting for their vectors: how many, why (the last embedding failure, recorded as
/// `<ms> <why>`, with how long ago), and what gets them their vectors.
pub(super) fn waiting_for_vectors_status(pending: usize, last_failure: Option<&str>, now_ms: i64) -> String {
    let why = last_failure
        .and_then(|f| f.split_once(' '))
        .and_then(|(at, why)| at.parse::<i64>().ok().map(|at| format!("; the last embedding failure, {} s ago: {why}", (now_ms - at).max(0) / 1000)))
        .unwrap_or_default();
    format!(
        "{pending} files are waiting for embeddings (keyword search finds them){why}; the watcher or a background sync started by a search \
         embeds them once the provider answers, `memory index` at once"
    )
}

/// The files `stored` records as not indexed, with why.
pub(crate) fn skipped_files(stored: &[FileRecord]) -> Vec<SkippedFile> {
    stored
        .iter()
        .filter_map(|f| {
            let (reason, retried) = match f.state() {
                // Records written before the reason was kept say what it can be.
                FileState::Skipped { why: "" } => ("binary, not UTF-8 or too large".to_string(), false),
                FileState::Skipped { why } => (why.to_string(), false),
                FileState::Unreadable { why } => (format!("unreadable ({why})"), true),
                _ => return None,
            };
            Some(SkippedFile { path: f.path.clone(), reason, retried })
        })
        .collect()
}

impl IndexedBackend {
    /// A read or write found the live index damaged: set it aside ([`IndexStorage::set_aside_live`]) and open an
    /// empty one, which the next sync (or the search's own first sync) fills from the files. Returns what to tell
    /// the user; the error itself when the storage cannot set its index aside. The caller holds the sync locks.
    pub(super) async fn replace_corrupt_live(&self, why: MemoryError) -> Result<String> {
        let _patch = self.writer.patch().await;
        if let Err(e) = self.store().close().await {
            debug!(error = %e, "closing the damaged index failed");
        }
        if !self.storage.set_aside_live(&why).await? {
            return Err(why);
        }
        let store = self.storage.open_live().await?;
        let marker = self.storage.live_marker().await?;
        self.set_live(store, marker);
        warn!(error = %why, "the index was damaged; it was set aside and is rebuilt from the memory files");
        Ok(format!("the index was damaged ({why}); it was set aside and rebuilt from the memory files"))
    }

    pub(super) async fn status_inner(&self) -> Result<Status> {
        self.follow_live().await?;
        let store = self.store();
        let (files, chunks) = store.counts().await?;
        let stored = store.files().await?;
        let identity = store.identity().await?;
        let mut warnings = Vec::new();
        let mut rebuild_pending = false;
        if let Some(id) = &identity {
            let diff = id.differences(&self.desired_identity());
            if !diff.is_empty() {
                rebuild_pending = true;
                warnings.push(format!("index identity differs ({}); the next sync rebuilds it", diff.join(", ")));
            }
        }
        if let Some(cause) = store.read_only() {
            warnings.push(format!("the index is open read-only ({cause}); nothing is synced until it can be written"));
        }
        let skipped = skipped_files(&stored);
        let pending = stored.iter().filter(|f| f.state() == FileState::Pending).count();
        if pending > 0 {
            warnings.push(waiting_for_vectors_status(pending, store.meta(META_LAST_EMBED_FAILURE).await.ok().flatten().as_deref(), crate::now_ms()));
        }
        let batch_disabled = self.embedder.as_ref().and_then(|e| e.batch()).and_then(crate::embedding::BatchEmbedder::disabled_reason);
        if let Some(reason) = &batch_disabled {
            warnings.push(reason.clone());
        }
        let stale = self.count_stale(&stored);
        let mut extra = match store.status_details().await {
            Ok(details) => details,
            Err(e) => {
                warnings.push(format!("store details unavailable: {e}"));
                serde_json::Map::new()
            }
        };
        if self.embedder.as_ref().is_some_and(|e| e.batch().is_some()) {
            extra.insert("batch".into(), serde_json::json!({ "enabled": batch_disabled.is_none(), "disabledReason": batch_disabled }));
        }
        extra.insert("staleFiles".into(), stale.into());
        extra.insert("indexed".into(), identity.is_some().into());
        if let Some(id) = identity {
            extra.insert("tokenizer".into(), id.tokenizer.into());
        }
        Ok(Status {
            backend: self.name.clone(),
            workspace: self.roots().workspace.display().to_string(),
            index_path: Some(store.location()),
            files,
            chunks,
            capabilities: self.capabilities(),
            provider: self.embedder.as_ref().map(|e| e.id().to_string()),
            model: self.embedder.as_ref().map(|e| e.model().to_string()),
            dimensions: self.embedder.as_ref().and_then(|e| e.dimensions()),
            last_sync_ms: store.meta(META_LAST_SYNC).await?.and_then(|v| v.parse().ok()),
            dirty: stale > 0,
            rebuild_pending,
            fallback: None,
            warnings,
            skipped,
            extra,
        })
    }
}
