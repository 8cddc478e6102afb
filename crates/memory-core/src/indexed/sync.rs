//! The writer side of the engine: a sync of the files into the live index under the writer lock, a sync beside
//! searches (words under the index's locks, embeddings outside them), and a full rebuild beside the live index,
//! swapped in when complete.

use super::*;

/// Files per committed batch: a crash loses at most one batch of work, never the index.
pub(super) const FILES_PER_BATCH: usize = 256;

/// The most chunks a sync beside searches embeds outside the index's locks ([`IndexedBackend::sync_beside_searches`]);
/// a larger backfill is embedded under them.
pub(super) const OFF_LOCK_MAX_CHUNKS: usize = 2048;

/// `items.iter().map(f)`, spread over the available cores (in order).
pub(super) fn map_parallel<T: Sync, R: Send>(items: &[T], f: impl Fn(&T) -> R + Sync) -> Vec<R> {
    let threads = std::thread::available_parallelism().map(std::num::NonZero::get).unwrap_or(1).min(8);
    if threads <= 1 || items.len() < 8 {
        return items.iter().map(f).collect();
    }
    let per = items.len().div_ceil(threads);
    std::thread::scope(|s| {
        let handles: Vec<_> = items.chunks(per).map(|part| s.spawn(|| part.iter().map(&f).collect::<Vec<R>>())).collect();
        handles.into_iter().flat_map(|h| h.join().expect("indexing thread panicked")).collect()
    })
}

/// Which files a sync looks at.
pub(super) enum SyncScope {
    /// Every memory file, discovered by the sync.
    All,
    /// Every memory file that changed, discovered by the sync; notes only waiting for their vectors are left to a
    /// sync that completes them (`memory index`, the watcher's): what a sync someone waits for does.
    Changed,
    /// The files under `keys` alone (`files`: those of them on disk); the index's other files stay as they are.
    Named { files: Vec<MemoryFile>, keys: Vec<FileKey> },
}

impl IndexedBackend {
    /// A sync under this engine's locks, a damaged index repaired and synced again.
    pub(super) async fn sync_locked(&self, options: SyncOptions) -> Result<SyncReport> {
        match self.sync_inner(options).await {
            Err(e) if e.kind() == crate::ErrorKind::CorruptIndex => {
                let note = self.replace_corrupt_live(e).await?;
                let mut report = self.sync_inner(options).await?;
                report.warnings.push(note);
                Ok(report)
            }
            other => other,
        }
    }

    /// A sync while searches share the index (the watcher's in `memory serve`): the provider is never waited for
    /// under the index's locks. Under them, the changed files are indexed by their words (found at once) and the
    /// chunks left for the provider collected; without them, those are embedded ([`patience`]: each call bounded,
    /// none while paused), so searches and appends sync and answer meanwhile; under them again, the vectors are
    /// applied to the files still as they were (a file changed meanwhile keeps waiting: its change brings another
    /// sync). A first build goes the same way; a rebuild for new settings (or a forced one) runs as any sync.
    pub(super) async fn sync_beside_searches(&self, options: SyncOptions) -> Result<SyncReport> {
        let bound = patience::Bound::of(options.embed_wait);
        let collected = Mutex::new(embed::Collected::default());
        let (mut report, settings) = {
            let _hold = self.writer.hold(self.storage.as_ref(), "sync").await?;
            self.follow_live().await?;
            let live = self.store();
            let desired = self.desired_identity();
            let current = live.identity().await?;
            if options.force || current.as_ref().is_some_and(|c| !c.same_settings(&desired)) {
                return self.sync_locked(options).await;
            }
            let planned = desired.provider_fingerprint.as_deref();
            let with = embed::SyncVectors { bound: patience::Bound::WordsOnly, collect: Some(&collected), computed: None };
            let words = self.sync_into(&live, &live, planned, SyncScope::All, with).await;
            self.live.forget_fingerprint();
            let report = match words {
                Err(e) if e.kind() == crate::ErrorKind::CorruptIndex => return self.sync_locked(options).await,
                other => other?,
            };
            if current.is_none() {
                live.set_identity(&desired).await?;
                self.live.mark_indexed();
            }
            live.set_meta(META_LAST_SYNC, &crate::now_ms().to_string()).await?;
            (report, desired)
        };
        let collected = collected.into_inner().unwrap_or_else(std::sync::PoisonError::into_inner);
        if collected.is_empty() {
            return Ok(report);
        }
        if collected.len() > OFF_LOCK_MAX_CHUNKS {
            // A backfill (a first build, a bulk import): its texts and vectors are not held in memory all at once;
            // it is embedded under the locks as any sync, the notes already found by their words meanwhile.
            drop(collected);
            let _hold = self.writer.hold(self.storage.as_ref(), "sync").await?;
            report.add_vectors_pass(self.sync_locked(options).await?);
            return Ok(report);
        }
        let vectors = self.embed_collected(collected, bound, &mut report).await;
        if vectors.is_empty() {
            return Ok(report);
        }
        let _hold = self.writer.hold(self.storage.as_ref(), "sync").await?;
        self.follow_live().await?;
        let live = self.store();
        // The identity this sync indexed for (a provider that learns its width from its first answer reports it
        // only now, so the one stored is compared, not the one the provider would describe now).
        if !live.identity().await?.is_some_and(|id| id.same_settings(&settings)) {
            // The settings changed meanwhile: these vectors belong to no index; the rebuild embeds anew.
            return Ok(report);
        }
        if let (true, Some(key)) = (self.config.memory.search.cache.enabled, self.cache_key()) {
            let entries: Vec<(String, Vec<f32>)> = vectors.iter().map(|(h, v)| (h.clone(), v.clone())).collect();
            if let Err(e) = live.cache_embeddings(&key, &entries, self.config.memory.search.cache.max_entries).await {
                warn!(error = %e, "embedding cache write failed");
            }
        }
        let computed = BatchVectors { vectors, pending: HashSet::new() };
        let with = embed::SyncVectors { bound: patience::Bound::WordsOnly, collect: None, computed: Some(computed) };
        let applied = self.sync_into(&live, &live, settings.provider_fingerprint.as_deref(), SyncScope::All, with).await;
        self.live.forget_fingerprint();
        let applied = applied?;
        report.files_pending = applied.files_pending;
        report.warnings.extend(applied.warnings);
        live.set_meta(META_LAST_SYNC, &crate::now_ms().to_string()).await?;
        Ok(report)
    }

    pub(super) async fn sync_inner(&self, options: SyncOptions) -> Result<SyncReport> {
        self.follow_live().await?;
        let result = self.sync_inner_uncached(options).await;
        self.live.forget_fingerprint();
        result
    }

    pub(super) async fn sync_inner_uncached(&self, options: SyncOptions) -> Result<SyncReport> {
        let desired = self.desired_identity();
        let live = self.store();
        let current = live.identity().await?;
        let needs_rebuild = match &current {
            Some(cur) if !cur.same_settings(&desired) => {
                info!(changed = ?cur.differences(&desired), "index identity changed; rebuilding beside the live index");
                true
            }
            Some(_) => options.force,
            None => false,
        };
        // The identity is written only once a sync has completed: an index without one is unfinished, and the
        // next search completes it before answering.
        let bound = patience::Bound::of(options.embed_wait);
        if !needs_rebuild {
            let planned = desired.provider_fingerprint.as_deref();
            if current.is_none() && bound.bounded() && self.embedder.is_some() {
                // A first build someone waits for (a search's, an append's): every note by its words first, so
                // that the search answers from them (a backfill's embeddings take minutes, a provider that does
                // not answer longer), then the vectors within what is left of the wait, found pending as the files
                // were left. (The watcher's first build: `sync_beside_searches`.)
                let mut report = self.sync_into(&live, &live, planned, SyncScope::All, patience::Bound::WordsOnly.into()).await?;
                live.set_identity(&desired).await?;
                live.set_meta(META_LAST_SYNC, &crate::now_ms().to_string()).await?;
                self.live.mark_indexed();
                let vectors = self.sync_into(&live, &live, planned, SyncScope::All, bound.into()).await?;
                report.add_vectors_pass(vectors);
                live.set_meta(META_LAST_SYNC, &crate::now_ms().to_string()).await?;
                return Ok(report);
            }
            // Someone waits (an append): the files that changed, not the notes waiting for their vectors, which
            // would take the wait (minutes of a local model's work after a large first build).
            let scope = if matches!(bound, patience::Bound::Until(_)) { SyncScope::Changed } else { SyncScope::All };
            let report = self.sync_into(&live, &live, planned, scope, bound.into()).await?;
            if current.is_none() {
                live.set_identity(&desired).await?;
            }
            live.set_meta(META_LAST_SYNC, &crate::now_ms().to_string()).await?;
            return Ok(report);
        }

        // Rebuild into a staging store; search keeps answering from `live` until the swap, and keeps `live` in step
        // with the files meanwhile (see `freshen`).
        let _rebuilding = self.writer.rebuild_running();
        let staging = self.storage.open_staging().await?;
        let filled = async {
            let report = self.sync_into(&staging, &live, desired.provider_fingerprint.as_deref(), SyncScope::All, bound.into()).await?;
            staging.set_identity(&desired).await?;
            staging.set_meta(META_LAST_SYNC, &crate::now_ms().to_string()).await?;
            Ok::<_, MemoryError>(report)
        }
        .await;
        let mut report = match filled {
            Ok(report) => report,
            Err(e) => {
                // The live index is untouched; what the rebuild wrote goes (a full disk stays full otherwise).
                if let Err(discard) = self.storage.discard_staging(staging).await {
                    warn!(error = %discard, "the failed rebuild's files could not be removed");
                }
                return Err(e);
            }
        };
        // Files that changed while the rebuild ran are in the old live index only: the next search's freshness
        // check finds them different from the new index's records and syncs them.
        let _patch = self.writer.patch().await;
        let live = self.store();
        let new_live = self.storage.promote(live, staging).await?;
        let marker = self.storage.live_marker().await?;
        self.set_live(new_live, marker);
        self.live.mark_indexed();
        report.rebuilt = true;
        Ok(report)
    }

    /// Bring `target` in step with the files. Embeddings are looked up in `target`'s cache, then in
    /// `cache_from`'s (the old index during a rebuild), so a rebuild re-embeds nothing already embedded.
    /// `scope` says which files the sync looks at (every file, or a few a change journal named); `bound`, how long it
    /// waits for the embedding provider ([`patience`]).
    pub(super) async fn sync_into(
        &self,
        target: &Arc<dyn ChunkStore>,
        cache_from: &Arc<dyn ChunkStore>,
        planned: Option<&str>,
        scope: SyncScope,
        with: embed::SyncVectors<'_>,
    ) -> Result<SyncReport> {
        let embed::SyncVectors { bound, collect, computed } = with;
        // A sync of every file answers for the files a host announced: read by content, not trusted by their stat.
        // If it fails (any early return) they stay announced.
        let announced = Announced::take(self, matches!(scope, SyncScope::All | SyncScope::Changed));
        let leave_waiting = matches!(scope, SyncScope::Changed);
        let mut report = SyncReport::default();
        let (files, stored) = match scope {
            SyncScope::All | SyncScope::Changed => (self.files.all(), target.files().await?),
            SyncScope::Named { files, keys } => (files, target.file_records(&keys).await?),
        };
        report.files_scanned = files.len();
        let announced_keys: HashSet<String> = announced.paths.iter().map(|p| self.files.key_of_changed(p)).collect();
        let plan = plan_sync(&files, &stored, &announced_keys, leave_waiting);
        let work = plan.work;
        let removals = plan.removals;
        report.files_unchanged = plan.unchanged;
        report.files_removed = removals.len();

        let progress = self.progress.read_locked().clone();
        let total = work.len();
        let mut done = 0;
        let mut removals = Some(removals);
        // With provider batch jobs, every file is prepared first so that all new chunks go out as a few jobs.
        let batch_mode = self.batch_state_file.is_some()
            && self.embedder.as_ref().is_some_and(|e| e.batch().is_some() && planned == Some(e.fingerprint().as_str()));
        let mut prepared_parts: Vec<Option<Vec<Prepared>>> = if batch_mode {
            work.chunks(FILES_PER_BATCH).map(|part| Some(map_parallel(part, |(f, old)| self.prepare(f, *old)))).collect()
        } else {
            Vec::new()
        };
        let batch_vectors = match computed {
            Some(computed) => computed,
            None if batch_mode => self.run_batch_jobs(&prepared_parts, target, cache_from, &mut report).await,
            None => BatchVectors::default(),
        };
        for (i, part) in work.chunks(FILES_PER_BATCH).enumerate() {
            // Reading, hashing, chunking and analysing are CPU work: spread them over the cores.
            let prepared = match prepared_parts.get_mut(i).and_then(Option::take) {
                Some(p) => p,
                None => map_parallel(part, |(f, old)| self.prepare(f, *old)),
            };
            let mut batch = SyncBatch { removals: removals.take().unwrap_or_default(), ..Default::default() };
            for p in prepared {
                match p {
                    Prepared::Skipped { record, warning } => {
                        report.warnings.push(warning);
                        report.files_skipped += 1;
                        // Remember the skip (no chunks) so an unchanged file is not re-read and warned about on
                        // every sync; any old chunks of the file leave the index.
                        batch.upserts.push((record, Vec::new()));
                    }
                    Prepared::Touched(record) => {
                        report.files_unchanged += 1;
                        batch.touches.push(record);
                    }
                    Prepared::Changed { record, chunks, existed } => {
                        if existed {
                            report.files_changed += 1;
                        } else {
                            report.files_added += 1;
                        }
                        report.chunks_written += chunks.len();
                        batch.upserts.push((record, chunks));
                    }
                    Prepared::Appended { record, chunks } => {
                        report.files_changed += 1;
                        report.chunks_written += chunks.len();
                        batch.appends.push((record, chunks));
                    }
                    Prepared::Deferred => report.files_unchanged += 1,
                    Prepared::Vanished(source, key) => {
                        report.files_removed += 1;
                        batch.removals.push((source, key));
                    }
                }
            }
            let step = embed::EmbedStep { target, cache_from, planned, from_batch: &batch_vectors, bound, collect };
            self.embed_batch(&mut batch, &step, &mut report).await;
            report.files_pending += batch.upserts.iter().chain(batch.appends.iter()).filter(|(file, _)| file.state() == FileState::Pending).count();
            target.apply(batch).await?;
            done += part.len();
            if let Some(p) = &progress {
                p(SyncProgress { files_done: done, files_total: total, chunks_embedded: report.chunks_embedded });
            }
        }
        if let Some(removals) = removals.filter(|r| !r.is_empty()) {
            target.apply(SyncBatch { removals, ..Default::default() }).await?;
        }
        self.record_unrelated_probes(target, cache_from, planned, bound).await;
        debug!(?report, "sync finished");
        announced.answered();
        Ok(report)
    }
}
