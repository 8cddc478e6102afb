//! The checks of writing: a batch applied whole or not at all, and what an upsert, an append, a touch and a
//! removal each change and keep.

use std::path::PathBuf;
use std::sync::Arc;

use memory_core::store::{FileRecord, IndexStorage, Scope, SyncBatch};
use memory_core::Source;

use super::fixtures::{axis, chunk, chunk_texts, file, paths, query, record, set, upserts};
use super::{step, CheckResult, StoreHarness, Verdict};

/// A batch is applied whole or not at all: one that the store refuses leaves the index as it was.
pub async fn apply_is_all_or_nothing(_: &dyn StoreHarness, storage: Arc<dyn IndexStorage>, _: PathBuf) -> CheckResult {
    let store = step("open_live", storage.open_live().await)?;
    let a = (record(Source::Memory, "a.md", "alpha", 1), vec![chunk(Source::Memory, "a.md", 1, "alpha apples", Some(axis(0, 4)))]);
    let b = (record(Source::Memory, "b.md", "beta", 1), vec![chunk(Source::Memory, "b.md", 1, "beta bananas", Some(axis(1, 4)))]);
    step("apply the first batch", store.apply(upserts(vec![a, b])).await)?;
    ensure!(step("counts()", store.counts().await)? == (2, 2), "after the first batch: expected 2 files, 2 chunks");

    // A removal, a good upsert, then an upsert whose vector has the wrong width: a store checking widths
    // refuses the batch, and then none of it may be visible.
    let c = (record(Source::Memory, "c.md", "gamma", 2), vec![chunk(Source::Memory, "c.md", 1, "gamma grapes", Some(axis(2, 4)))]);
    let d = (record(Source::Memory, "d.md", "delta", 2), vec![chunk(Source::Memory, "d.md", 1, "delta dates", Some(vec![1.0, 0.0, 0.0]))]);
    let mixed = SyncBatch { upserts: vec![c, d], removals: vec![(Source::Memory, "b.md".into())], ..Default::default() };
    let reopened = || async { step("open_live again", storage.open_live().await) };
    match store.apply(mixed).await {
        Err(_) => {
            for s in [store.clone(), reopened().await?] {
                ensure!(paths(&*s).await? == set(&["a.md", "b.md"]), "a refused batch was applied in part: files are {:?}", paths(&*s).await?);
                ensure!(step("counts()", s.counts().await)? == (2, 2), "a refused batch changed the chunk count");
            }
        }
        Ok(()) => {
            for s in [store.clone(), reopened().await?] {
                ensure!(
                    paths(&*s).await? == set(&["a.md", "c.md", "d.md"]),
                    "an accepted batch is not all visible: files are {:?}",
                    paths(&*s).await?
                );
            }
        }
    }
    Ok(Verdict::Passed)
}

/// An upsert replaces the file's record and every one of its chunks; other files keep theirs.
pub async fn upsert_replaces_a_files_chunks(_: &dyn StoreHarness, storage: Arc<dyn IndexStorage>, _: PathBuf) -> CheckResult {
    let store = step("open_live", storage.open_live().await)?;
    let first = vec![file(Source::Memory, "notes.md", &["old one", "old two", "old three"], 1), file(Source::Memory, "other.md", &["kept"], 1)];
    step("apply", store.apply(upserts(first)).await)?;
    step("apply the replacement", store.apply(upserts(vec![file(Source::Memory, "notes.md", &["new text"], 5)])).await)?;
    ensure!(chunk_texts(&*store, Source::Memory, "notes.md").await? == ["new text"], "old chunks survived an upsert");
    ensure!(chunk_texts(&*store, Source::Memory, "other.md").await? == ["kept"], "an upsert touched another file");
    let rec = step("files()", store.files().await)?.into_iter().find(|f| f.path == "notes.md").ok_or("the upserted file has no record")?;
    ensure!(rec == record(Source::Memory, "notes.md", "new text", 5), "the record was not replaced: {rec:?}");
    ensure!(step("counts()", store.counts().await)? == (2, 2), "expected 2 files, 2 chunks");
    Ok(Verdict::Passed)
}

/// An append adds chunks to a file's existing ones and updates its record; nothing is deleted.
pub async fn append_keeps_the_old_chunks(_: &dyn StoreHarness, storage: Arc<dyn IndexStorage>, _: PathBuf) -> CheckResult {
    let store = step("open_live", storage.open_live().await)?;
    step("apply", store.apply(upserts(vec![file(Source::Sessions, "s.jsonl", &["first turn"], 1)])).await)?;
    let grown = record(Source::Sessions, "s.jsonl", "first turn\nsecond turn", 7);
    let batch = SyncBatch { appends: vec![(grown.clone(), vec![chunk(Source::Sessions, "s.jsonl", 3, "second turn", None)])], ..Default::default() };
    step("apply the append", store.apply(batch).await)?;
    ensure!(
        chunk_texts(&*store, Source::Sessions, "s.jsonl").await? == ["first turn", "second turn"],
        "an append lost the old chunks or the new one"
    );
    ensure!(step("files()", store.files().await)? == vec![grown], "the appended file's record was not updated");
    Ok(Verdict::Passed)
}

/// A touch changes the file's size and mtime (and what candidates report as its mtime), never its chunks.
pub async fn touch_updates_only_the_record(_: &dyn StoreHarness, storage: Arc<dyn IndexStorage>, _: PathBuf) -> CheckResult {
    let store = step("open_live", storage.open_live().await)?;
    step("apply", store.apply(upserts(vec![file(Source::Memory, "t.md", &["touch me", "and me"], 1_000)])).await)?;
    let touched = FileRecord { size: 99, mtime_ms: 9_000, ..record(Source::Memory, "t.md", "touch me\nand me", 0) };
    step("apply the touch", store.apply(SyncBatch { touches: vec![touched.clone()], ..Default::default() }).await)?;
    ensure!(step("files()", store.files().await)? == vec![touched], "the touched record did not read back");
    let chunks = step("file_chunks()", store.file_chunks(Source::Memory, "t.md", 10).await)?;
    ensure!(chunks.iter().map(|c| c.text.as_str()).collect::<Vec<_>>() == ["touch me", "and me"], "a touch changed the chunks");
    ensure!(
        chunks.iter().all(|c| c.file_mtime_ms == 9_000),
        "candidates still report the old mtime: {:?}",
        chunks.iter().map(|c| c.file_mtime_ms).collect::<Vec<_>>()
    );
    let hits = step("keyword_search()", store.keyword_search(&query("touch"), 10, &Scope::default()).await)?;
    ensure!(hits.len() == 1 && hits[0].file_mtime_ms == 9_000, "keyword candidates after a touch: {hits:?}");
    Ok(Verdict::Passed)
}

/// A removal drops the record and every chunk of the file, and it is no longer found.
pub async fn removal_drops_the_file_and_its_chunks(_: &dyn StoreHarness, storage: Arc<dyn IndexStorage>, _: PathBuf) -> CheckResult {
    let store = step("open_live", storage.open_live().await)?;
    let files = vec![file(Source::Memory, "gone.md", &["ephemeral words", "more ephemeral"], 1), file(Source::Memory, "stays.md", &["durable"], 1)];
    step("apply", store.apply(upserts(files)).await)?;
    step("apply the removal", store.apply(SyncBatch { removals: vec![(Source::Memory, "gone.md".into())], ..Default::default() }).await)?;
    ensure!(paths(&*store).await? == set(&["stays.md"]), "the removed file is still listed");
    ensure!(step("counts()", store.counts().await)? == (1, 1), "chunks of the removed file remain");
    ensure!(
        step("keyword_search()", store.keyword_search(&query("ephemeral"), 10, &Scope::default()).await)?.is_empty(),
        "the removed file is still found"
    );
    // Removing a file the store never had is not an error.
    step("remove an unknown file", store.apply(SyncBatch { removals: vec![(Source::Memory, "never.md".into())], ..Default::default() }).await)?;
    Ok(Verdict::Passed)
}
