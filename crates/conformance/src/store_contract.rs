//! The storage contract: what every [`ChunkStore`] / [`IndexStorage`] must do, checked on the store itself.
//!
//! The engine suites ([`crate::run_all`]) prove whole engines; two stores can still diverge underneath them
//! (a score sign, what an unreadable identity means) until a ranking happens to show it. These checks call the
//! traits directly, so a store author (in this repository or another) learns which promise broke:
//!
//! ```no_run
//! # use std::{path::Path, sync::Arc};
//! # use conformance::store_contract::{self, StoreHarness};
//! # use memory_core::store::IndexStorage;
//! struct Harness;
//! #[async_trait::async_trait]
//! impl StoreHarness for Harness {
//!     async fn open(&self, dir: &Path) -> memory_core::Result<Arc<dyn IndexStorage>> {
//!         Ok(Arc::new(memory_builtin::SqliteStorage::new(dir.join("index.sqlite"))))
//!     }
//! }
//! # async fn demo() {
//! store_contract::run_all(Arc::new(Harness)).await.assert_ok();
//! # }
//! ```
//!
//! Each check gets a fresh, empty folder and asks the harness for a storage in it; the writer-lock check asks
//! twice for the same folder (two handles on one index, as two processes would have).

use std::collections::{BTreeSet, HashMap};
use std::fmt::Write as _;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use memory_core::identity::IndexIdentity;
use memory_core::store::{Candidate, ChunkRecord, ChunkStore, EmbeddingCacheKey, FileRecord, IndexStorage, KeywordQuery, SyncBatch};
use memory_core::{ErrorKind, Result, Source};

/// How the checks reach the store under test.
#[async_trait]
pub trait StoreHarness: Send + Sync + 'static {
    /// A storage whose index lives in `dir` (empty on the first call for a folder). Called twice with the same
    /// folder, it must return two handles on the same index.
    async fn open(&self, dir: &Path) -> Result<Arc<dyn IndexStorage>>;

    /// Overwrite the stored identity of the index in `dir` (`store` is its open live handle) with something this
    /// code cannot read (what a newer version, a torn write or a foreign tool leaves). `None`: the store keeps
    /// the identity typed and cannot hold an unreadable one, so the check does not apply.
    async fn write_unreadable_identity(&self, _dir: &Path, _store: &dyn ChunkStore) -> Option<Result<()>> {
        None
    }

    /// Run now, on the index in `dir`, the maintenance the store otherwise runs on its own schedule (compaction,
    /// index optimisation): checks that compare what a store settles to call it first. A store that keeps every
    /// statistic exact at each write has nothing to do.
    async fn settle(&self, _dir: &Path) -> Result<()> {
        Ok(())
    }
}

/// What one check found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Passed,
    /// Not applicable to this store, with the reason (printed: nothing is passed silently).
    Skipped(String),
    Failed(String),
}

/// The verdict of every check, in run order.
#[derive(Debug, Default)]
pub struct ContractReport {
    pub checks: Vec<(&'static str, Verdict)>,
}

impl ContractReport {
    pub fn failed(&self) -> Vec<&'static str> {
        self.checks.iter().filter(|(_, v)| matches!(v, Verdict::Failed(_))).map(|(n, _)| *n).collect()
    }

    pub fn skipped(&self) -> Vec<&'static str> {
        self.checks.iter().filter(|(_, v)| matches!(v, Verdict::Skipped(_))).map(|(n, _)| *n).collect()
    }

    pub fn is_ok(&self) -> bool {
        self.failed().is_empty()
    }

    pub fn render(&self) -> String {
        let mut out = String::new();
        for (name, v) in &self.checks {
            let _ = match v {
                Verdict::Passed => writeln!(out, "ok      {name}"),
                Verdict::Skipped(why) => writeln!(out, "skipped {name}: {why}"),
                Verdict::Failed(why) => writeln!(out, "FAILED  {name}: {why}"),
            };
        }
        out
    }

    /// Panic with every failure if any check failed.
    pub fn assert_ok(&self) {
        let text = self.render();
        println!("{text}");
        assert!(self.is_ok(), "store contract failed:\n{text}");
    }
}

/// A check's outcome before it is named: `Err` carries the failure.
pub type CheckResult = std::result::Result<Verdict, String>;

macro_rules! ensure {
    ($cond:expr, $($msg:tt)+) => {
        let holds: bool = $cond;
        if !holds {
            return Err(format!($($msg)+));
        }
    };
}

/// A store error as a check failure, saying which step failed.
fn step<T>(what: &str, r: Result<T>) -> std::result::Result<T, String> {
    r.map_err(|e| format!("{what}: {e}"))
}

/// Run every check of the contract, each on a fresh folder.
pub async fn run_all(harness: Arc<dyn StoreHarness>) -> ContractReport {
    let h = harness.as_ref();
    let mut report = ContractReport::default();
    macro_rules! run {
        ($name:ident) => {
            report.checks.push((stringify!($name), verdict(fresh(h, $name).await)));
        };
    }
    run!(new_store_is_empty_and_identity_round_trips);
    run!(apply_is_all_or_nothing);
    run!(upsert_replaces_a_files_chunks);
    run!(append_keeps_the_old_chunks);
    run!(touch_updates_only_the_record);
    run!(removal_drops_the_file_and_its_chunks);
    run!(keyword_scores_are_higher_for_better_matches);
    run!(keyword_scores_do_not_depend_on_earlier_writes);
    run!(searches_honour_source_filters);
    run!(files_named_matches_path_name_or_stem_only);
    run!(stored_vectors_round_trip);
    run!(embedding_cache_is_keyed_and_pruned_oldest_first);
    run!(meta_round_trips);
    run!(unreadable_identity_is_a_corrupt_index);
    run!(staging_and_promote_keep_the_live_index);
    report.checks.push((
        "writer_lock_is_exclusive_and_waits_off_the_runtime",
        verdict(writer_lock_is_exclusive_and_waits_off_the_runtime(harness.clone()).await),
    ));
    report
}

fn verdict(r: CheckResult) -> Verdict {
    r.unwrap_or_else(Verdict::Failed)
}

/// Run `check` on a storage in a new temporary folder.
async fn fresh<'h, F, Fut>(h: &'h dyn StoreHarness, check: F) -> CheckResult
where
    F: FnOnce(&'h dyn StoreHarness, Arc<dyn IndexStorage>, PathBuf) -> Fut,
    Fut: Future<Output = CheckResult> + 'h,
{
    let dir = tempfile::tempdir().map_err(|e| format!("temporary folder: {e}"))?;
    let storage = step("open the storage", h.open(dir.path()).await)?;
    let result = check(h, storage, dir.path().to_path_buf()).await;
    drop(dir);
    result
}

// ---- test data -------------------------------------------------------------------------------------------

fn record(source: Source, path: &str, content: &str, mtime_ms: i64) -> FileRecord {
    FileRecord { source, path: path.into(), hash: memory_core::sha256_hex(content.as_bytes()), size: content.len() as u64, mtime_ms }
}

fn chunk(source: Source, path: &str, start_line: usize, text: &str, embedding: Option<Vec<f32>>) -> ChunkRecord {
    ChunkRecord {
        id: format!("{}:{path}:{start_line}", source.as_str()),
        source,
        path: path.into(),
        start_line,
        end_line: start_line + 1,
        text: text.into(),
        hash: memory_core::sha256_hex(text.as_bytes()),
        terms: memory_core::analysis::document_terms_joined(text),
        heading_terms: String::new(),
        importance: None,
        embedding,
    }
}

/// A file of one chunk per text, two lines apart.
fn file(source: Source, path: &str, texts: &[&str], mtime_ms: i64) -> (FileRecord, Vec<ChunkRecord>) {
    let chunks = texts.iter().enumerate().map(|(i, t)| chunk(source, path, 1 + 2 * i, t, None)).collect();
    (record(source, path, &texts.join("\n"), mtime_ms), chunks)
}

fn upserts(files: Vec<(FileRecord, Vec<ChunkRecord>)>) -> SyncBatch {
    SyncBatch { upserts: files, ..Default::default() }
}

fn query(text: &str) -> KeywordQuery {
    KeywordQuery { terms: memory_core::analysis::query_terms(text) }
}

fn identity(dimensions: Option<usize>) -> IndexIdentity {
    IndexIdentity {
        schema: memory_core::indexed::SCHEMA_VERSION,
        provider: dimensions.map(|_| "contract".into()),
        model: dimensions.map(|_| "unit-vectors".into()),
        provider_fingerprint: dimensions.map(|d| format!("contract-{d}")),
        dimensions,
        sources: vec!["memory".into(), "sessions".into()],
        extra_paths: Vec::new(),
        chunk_tokens: 400,
        chunk_overlap: 80,
        chunker: "contract".into(),
        tokenizer: "contract".into(),
    }
}

/// Unit vector along axis `i` of `dims`.
fn axis(i: usize, dims: usize) -> Vec<f32> {
    let mut v = vec![0f32; dims];
    v[i] = 1.0;
    v
}

async fn paths(store: &dyn ChunkStore) -> std::result::Result<BTreeSet<String>, String> {
    Ok(step("files()", store.files().await)?.into_iter().map(|f| f.path).collect())
}

fn set(items: &[&str]) -> BTreeSet<String> {
    items.iter().map(std::string::ToString::to_string).collect()
}

async fn chunk_texts(store: &dyn ChunkStore, source: Source, path: &str) -> std::result::Result<Vec<String>, String> {
    Ok(step("file_chunks()", store.file_chunks(source, path, 100).await)?.into_iter().map(|c| c.text).collect())
}

// ---- the checks --------------------------------------------------------------------------------------------

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
    let hits = step("keyword_search()", store.keyword_search(&query("touch"), 10, &[]).await)?;
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
    ensure!(step("keyword_search()", store.keyword_search(&query("ephemeral"), 10, &[]).await)?.is_empty(), "the removed file is still found");
    // Removing a file the store never had is not an error.
    step("remove an unknown file", store.apply(SyncBatch { removals: vec![(Source::Memory, "never.md".into())], ..Default::default() }).await)?;
    Ok(Verdict::Passed)
}

/// `keyword_score` points the way `Candidate::keyword_score` states: positive for a match, higher for the better
/// match, and results come best first. A store that passes its engine's number the other way round fails here.
pub async fn keyword_scores_are_higher_for_better_matches(_: &dyn StoreHarness, storage: Arc<dyn IndexStorage>, _: PathBuf) -> CheckResult {
    let store = step("open_live", storage.open_live().await)?;
    let files = vec![
        file(Source::Memory, "strong.md", &["kiwi kiwi kiwi orchard"], 1),
        file(Source::Memory, "weak.md", &["kiwi beside many other ordinary words about the weather and the garden"], 1),
        file(Source::Memory, "none.md", &["nothing relevant here"], 1),
    ];
    step("apply", store.apply(upserts(files)).await)?;
    let hits = step("keyword_search()", store.keyword_search(&query("kiwi"), 10, &[]).await)?;
    better_match_scores_higher(&hits, "strong.md", "weak.md")?;
    ensure!(hits.iter().all(|c| c.vector_score.is_none()), "keyword candidates carry a vector score");
    let limited = step("keyword_search(limit 1)", store.keyword_search(&query("kiwi"), 1, &[]).await)?;
    ensure!(limited.len() == 1 && limited[0].path == "strong.md", "limit 1 did not return the best match: {limited:?}");
    // Query syntax of the store's engine is never interpreted: terms are literals.
    let odd = KeywordQuery { terms: vec!["NEAR".into(), "kiwi*".into(), "\"".into(), "OR".into()] };
    step("keyword_search() with syntax-like terms", store.keyword_search(&odd, 10, &[]).await)?;
    Ok(Verdict::Passed)
}

/// A keyword score depends on what the index holds, not on how it got there: a store whose files were rewritten,
/// removed, and written by words first and with vectors after (as a first search builds an index) scores a query
/// exactly as a store written once with the same files, once both have settled ([`StoreHarness::settle`]). (A
/// store whose keyword statistics keep removed rows for good counts the same chunk twice after each rewrite: its
/// document frequencies and lengths drift with every edit.)
pub async fn keyword_scores_do_not_depend_on_earlier_writes(h: &dyn StoreHarness, storage: Arc<dyn IndexStorage>, dir: PathBuf) -> CheckResult {
    let last = |vectors: bool| {
        let v = |i: usize| vectors.then(|| axis(i, 4));
        vec![
            (
                record(Source::Memory, "a.md", "a", 3),
                vec![
                    chunk(Source::Memory, "a.md", 1, "kiwi orchard planted in spring", v(0)),
                    chunk(Source::Memory, "a.md", 3, "notes about the weather this week", v(1)),
                ],
            ),
            (record(Source::Memory, "b.md", "b", 1), vec![chunk(Source::Memory, "b.md", 1, "kiwi kiwi harvest and the weather", v(2))]),
            (record(Source::Memory, "c.md", "c", 1), vec![chunk(Source::Memory, "c.md", 1, "nothing relevant here at all", v(3))]),
        ]
    };
    let rewritten = step("open_live", storage.open_live().await)?;
    let draft = "an early draft with many many words about kiwi and other fruit along the long garden path";
    step(
        "apply the first files",
        rewritten
            .apply(upserts(vec![file(Source::Memory, "a.md", &[draft], 1), file(Source::Memory, "gone.md", &["kiwi weather soon removed"], 1)]))
            .await,
    )?;
    for round in 0..3 {
        let text = format!("draft {round} of the kiwi notes, weather words and more words");
        step("rewrite a file", rewritten.apply(upserts(vec![file(Source::Memory, "a.md", &[&text], 2)])).await)?;
    }
    step("remove a file", rewritten.apply(SyncBatch { removals: vec![(Source::Memory, "gone.md".into())], ..Default::default() }).await)?;
    step("apply the last files by their words", rewritten.apply(upserts(last(false))).await)?;
    step("apply the last files with vectors", rewritten.apply(upserts(last(true))).await)?;

    let other = tempfile::tempdir().map_err(|e| format!("temporary folder: {e}"))?;
    let once = step("open a second storage", h.open(other.path()).await)?;
    let once = step("open_live", once.open_live().await)?;
    step("apply the last files once", once.apply(upserts(last(true))).await)?;
    step("settle the rewritten store", h.settle(&dir).await)?;
    step("settle the store written once", h.settle(other.path()).await)?;

    for q in ["kiwi weather", "weather", "orchard spring kiwi"] {
        let scores = |hits: Vec<Candidate>| hits.into_iter().map(|c| (c.path, c.start_line, c.keyword_score.unwrap_or(f64::NAN))).collect::<Vec<_>>();
        let a = scores(step("keyword_search() after rewrites", rewritten.keyword_search(&query(q), 10, &[]).await)?);
        let b = scores(step("keyword_search() written once", once.keyword_search(&query(q), 10, &[]).await)?);
        let same = a.len() == b.len() && a.iter().zip(&b).all(|(x, y)| x.0 == y.0 && x.1 == y.1 && (x.2 - y.2).abs() <= 1e-9 * x.2.abs().max(1.0));
        ensure!(same, "`{q}`: the rewritten store scores {a:?}, the store written once {b:?}");
    }
    Ok(Verdict::Passed)
}

/// The hits of a query that `better` matches better than `worse` (and nothing else matches): exactly these two, in
/// that order, with positive keyword scores, the better one's higher.
fn better_match_scores_higher(hits: &[Candidate], better: &str, worse: &str) -> std::result::Result<(), String> {
    let order: Vec<&str> = hits.iter().map(|c| c.path.as_str()).collect();
    ensure!(order == [better, worse], "expected [{better}, {worse}], got {order:?}");
    let scores: Vec<f64> = hits.iter().map(|c| c.keyword_score.unwrap_or(f64::NAN)).collect();
    ensure!(scores.iter().all(|s| *s > 0.0), "keyword scores must be positive for a match (higher = better): {scores:?}");
    ensure!(scores[0] > scores[1], "the better match must have the higher keyword score: {scores:?}");
    Ok(())
}

/// Keyword and vector search return only the requested sources (all when none is given).
pub async fn searches_honour_source_filters(_: &dyn StoreHarness, storage: Arc<dyn IndexStorage>, _: PathBuf) -> CheckResult {
    let store = step("open_live", storage.open_live().await)?;
    let m = (record(Source::Memory, "m.md", "m", 1), vec![chunk(Source::Memory, "m.md", 1, "shared lighthouse", Some(axis(0, 4)))]);
    let s = (record(Source::Sessions, "s.jsonl", "s", 1), vec![chunk(Source::Sessions, "s.jsonl", 1, "shared lighthouse", Some(axis(0, 4)))]);
    step("apply", store.apply(upserts(vec![m, s])).await)?;
    let q = query("lighthouse");
    for (sources, want) in [
        (vec![], vec![Source::Memory, Source::Sessions]),
        (vec![Source::Memory], vec![Source::Memory]),
        (vec![Source::Sessions], vec![Source::Sessions]),
    ] {
        let kw: BTreeSet<Source> = step("keyword_search()", store.keyword_search(&q, 10, &sources).await)?.iter().map(|c| c.source).collect();
        ensure!(kw == want.iter().copied().collect(), "keyword search with sources {sources:?} returned {kw:?}");
        let vs: BTreeSet<Source> = step("vector_search()", store.vector_search(&axis(0, 4), 10, &sources).await)?.iter().map(|c| c.source).collect();
        ensure!(vs == want.iter().copied().collect(), "vector search with sources {sources:?} returned {vs:?}");
    }
    Ok(Verdict::Passed)
}

/// `files_named` returns files whose path, basename or stem equals the query, never a substring match.
pub async fn files_named_matches_path_name_or_stem_only(_: &dyn StoreHarness, storage: Arc<dyn IndexStorage>, _: PathBuf) -> CheckResult {
    let store = step("open_live", storage.open_live().await)?;
    let files = vec![
        file(Source::Memory, "memory/projects/rust.md", &["r"], 1),
        file(Source::Memory, "memory/projects/rustacean.md", &["r2"], 1),
        file(Source::Memory, "rust.txt.md", &["r3"], 1),
    ];
    step("apply", store.apply(upserts(files)).await)?;
    for (q, want) in [
        ("memory/projects/rust.md", vec!["memory/projects/rust.md"]),
        ("rust.md", vec!["memory/projects/rust.md"]),
        ("rust", vec!["memory/projects/rust.md"]),
        ("rust.txt", vec!["rust.txt.md"]),
        ("projects", vec![]),
        ("rus", vec![]),
    ] {
        let got: BTreeSet<String> = step("files_named()", store.files_named(q).await)?.into_iter().map(|f| f.path).collect();
        ensure!(got == set(&want), "files_named({q:?}) returned {got:?}, expected {want:?}");
    }
    Ok(Verdict::Passed)
}

/// Vectors read back exactly; vector search returns the nearest first with cosine scores; a query of the
/// wrong width is an error, not a silent empty answer.
pub async fn stored_vectors_round_trip(_: &dyn StoreHarness, storage: Arc<dyn IndexStorage>, _: PathBuf) -> CheckResult {
    let store = step("open_live", storage.open_live().await)?;
    let dims = 8;
    let v_a: Vec<f32> = (0..dims).map(|i| (i as f32 + 1.0) / 10.0).collect();
    let mut v_a: Vec<f32> = v_a;
    memory_core::embedding::sanitize_and_normalize(&mut v_a);
    let mut a = chunk(Source::Memory, "v.md", 1, "vector one", Some(v_a));
    let b = chunk(Source::Memory, "v.md", 3, "vector two", Some(axis(3, dims)));
    let c = chunk(Source::Memory, "v.md", 5, "no vector", None);
    let stored_a = a.embedding.clone().expect("set above");
    a.importance = Some(7);
    step("apply", store.apply(upserts(vec![(record(Source::Memory, "v.md", "v", 1), vec![a.clone(), b.clone(), c.clone()])])).await)?;
    let ids = vec![a.id.clone(), b.id.clone(), c.id.clone(), "no-such-chunk".to_string()];
    let back = step("chunk_vectors()", store.chunk_vectors(&ids).await)?;
    if back.is_empty() {
        return Ok(Verdict::Skipped("chunk_vectors keeps the trait default (this store cannot read vectors back)".into()));
    }
    let want: HashMap<String, Vec<f32>> = [(a.id.clone(), stored_a.clone()), (b.id.clone(), axis(3, dims))].into_iter().collect();
    ensure!(back == want, "chunk_vectors did not return exactly the stored vectors of the chunks that have one: {back:?}");
    let hits = step("vector_search()", store.vector_search(&axis(3, dims), 10, &[]).await)?;
    ensure!(hits.first().map(|h| h.chunk_id.as_str()) == Some(b.id.as_str()), "the identical vector is not the nearest: {hits:?}");
    ensure!(hits.iter().all(|h| h.chunk_id != c.id), "a chunk without a vector was returned by vector search");
    let score = hits[0].vector_score.unwrap_or(f64::NAN);
    // total_cmp: a NaN score fails too.
    ensure!((score - 1.0).abs().total_cmp(&1e-3).is_lt(), "cosine of identical unit vectors should be 1, got {score}");
    ensure!(hits.windows(2).all(|w| w[0].vector_score >= w[1].vector_score), "vector hits are not best first");
    ensure!(hits.iter().all(|h| h.keyword_score.is_none()), "vector candidates carry a keyword score");
    let a_hit = hits.iter().find(|h| h.chunk_id == a.id).ok_or("the other vector is missing from the hits")?;
    ensure!(
        a_hit.importance == Some(7) && a_hit.start_line == 1 && a_hit.end_line == 2 && a_hit.text == "vector one",
        "candidate fields did not round trip: {a_hit:?}"
    );
    match store.vector_search(&axis(0, dims + 1), 10, &[]).await {
        Err(e) if matches!(e.kind(), ErrorKind::InvalidInput | ErrorKind::Unavailable) => {}
        other => return Err(format!("a query vector of the wrong width must be InvalidInput or Unavailable, got {other:?}")),
    }
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

/// A rebuild fills a staging store while the live one keeps answering; promote makes it live for this handle
/// and for new ones; a new staging store starts empty (leftovers discarded).
pub async fn staging_and_promote_keep_the_live_index(_: &dyn StoreHarness, storage: Arc<dyn IndexStorage>, _: PathBuf) -> CheckResult {
    let live = step("open_live", storage.open_live().await)?;
    step("apply to live", live.apply(upserts(vec![file(Source::Memory, "old.md", &["walrus"], 1)])).await)?;
    step("set_identity on live", live.set_identity(&identity(None)).await)?;

    let leftover = step("open_staging", storage.open_staging().await)?;
    step("apply to a staging store", leftover.apply(upserts(vec![file(Source::Memory, "leftover.md", &["abandoned"], 1)])).await)?;
    drop(leftover);
    let staging = step("open_staging again", storage.open_staging().await)?;
    ensure!(step("counts()", staging.counts().await)? == (0, 0), "a new staging store holds a previous one's leftovers");
    ensure!(step("identity()", staging.identity().await)?.is_none(), "a new staging store has an identity");
    step("apply to staging", staging.apply(upserts(vec![file(Source::Memory, "new.md", &["narwhal"], 2)])).await)?;
    step("set_identity on staging", staging.set_identity(&identity(Some(4))).await)?;

    ensure!(paths(&*live).await? == set(&["old.md"]), "the live store changed while a rebuild was staged");
    ensure!(
        step("keyword_search()", live.keyword_search(&query("walrus"), 5, &[]).await)?.len() == 1,
        "live search stopped answering during a rebuild"
    );
    let other = step("open_live during the rebuild", storage.open_live().await)?;
    ensure!(paths(&*other).await? == set(&["old.md"]), "a new live handle sees the staging store before promote");

    let promoted = step("promote", storage.promote(live, staging).await)?;
    ensure!(paths(&*promoted).await? == set(&["new.md"]), "the promoted store does not hold the rebuilt index");
    ensure!(step("identity()", promoted.identity().await)? == Some(identity(Some(4))), "the promoted store lost the rebuilt identity");
    ensure!(step("keyword_search()", promoted.keyword_search(&query("narwhal"), 5, &[]).await)?.len() == 1, "the promoted store does not search");
    let fresh = step("open_live after promote", storage.open_live().await)?;
    ensure!(paths(&*fresh).await? == set(&["new.md"]), "a new live handle does not see the promoted index");
    step("destroy", storage.destroy().await)?;
    let after = step("open_live after destroy", storage.open_live().await)?;
    ensure!(step("counts()", after.counts().await)? == (0, 0), "destroy left index data behind");
    Ok(Verdict::Passed)
}

/// One writer at a time across handles: a second `writer_lock(false)` is `Unavailable`, `writer_lock(true)`
/// waits until the first guard drops, and it waits without blocking the async runtime it runs on.
///
/// It runs on a one-thread runtime of its own, on its own thread: a wait that blocked that thread would stall
/// the check itself, which the caller's timeout then reports instead of hanging.
pub async fn writer_lock_is_exclusive_and_waits_off_the_runtime(harness: Arc<dyn StoreHarness>) -> CheckResult {
    let (tx, rx) = tokio::sync::oneshot::channel();
    std::thread::spawn(move || {
        let rt = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
            Ok(rt) => rt,
            Err(e) => {
                let _ = tx.send(Err(format!("cannot start a runtime: {e}")));
                return;
            }
        };
        let _ = tx.send(rt.block_on(writer_lock_on_one_thread(harness)));
    });
    match tokio::time::timeout(Duration::from_secs(60), rx).await {
        Ok(Ok(r)) => r,
        Ok(Err(_)) => Err("the check's thread panicked".into()),
        Err(_) => Err("the check did not finish in 60 s: a waiting writer_lock blocked its runtime thread".into()),
    }
}

async fn writer_lock_on_one_thread(harness: Arc<dyn StoreHarness>) -> CheckResult {
    let dir = tempfile::tempdir().map_err(|e| format!("temporary folder: {e}"))?;
    let first = step("open the storage", harness.open(dir.path()).await)?;
    let second = step("open a second handle", harness.open(dir.path()).await)?;
    let Some(guard) = step("writer_lock(wait)", first.writer_lock(true).await)? else {
        return Ok(Verdict::Skipped("writer_lock returns None: the backend serialises writers itself".into()));
    };
    match second.writer_lock(false).await {
        Err(e) if e.kind() == ErrorKind::Unavailable => {}
        Err(e) => return Err(format!("a taken lock must refuse with Unavailable, got {e}")),
        Ok(_) => return Err("two handles held the writer lock at once".into()),
    }
    let waiter = tokio::spawn(async move { second.writer_lock(true).await });
    // The runtime has one thread: these sleeps finish only if the waiting lock left it free.
    for _ in 0..5 {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    ensure!(!waiter.is_finished(), "writer_lock(true) returned while another handle held the lock");
    drop(guard);
    let second_guard = match tokio::time::timeout(Duration::from_secs(20), waiter).await {
        Ok(Ok(Ok(Some(g)))) => g,
        Ok(Ok(Ok(None))) => return Err("the second handle got no guard".into()),
        Ok(Ok(Err(e))) => return Err(format!("the waiting writer_lock failed: {e}")),
        Ok(Err(e)) => return Err(format!("the waiting task failed: {e}")),
        Err(_) => return Err("writer_lock(true) still waits 20 s after the lock was released".into()),
    };
    match first.writer_lock(false).await {
        Err(e) if e.kind() == ErrorKind::Unavailable => {}
        other => return Err(format!("the lock must be taken while the second handle holds its guard, got {:?}", other.map(|g| g.is_some()))),
    }
    drop(second_guard);
    ensure!(step("writer_lock after both released", first.writer_lock(false).await)?.is_some(), "no guard after release");
    drop(dir);
    Ok(Verdict::Passed)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hit(path: &str, keyword_score: f64) -> Candidate {
        Candidate {
            chunk_id: path.into(),
            source: Source::Memory,
            path: path.into(),
            start_line: 1,
            end_line: 1,
            text: String::new(),
            importance: None,
            file_mtime_ms: 1,
            keyword_score: Some(keyword_score),
            vector_score: None,
        }
    }

    #[test]
    fn the_keyword_score_check_fails_a_store_whose_scores_point_the_wrong_way() {
        assert_eq!(better_match_scores_higher(&[hit("strong.md", 2.5), hit("weak.md", 0.7)], "strong.md", "weak.md"), Ok(()));
        // SQLite's own convention (negative, more negative = better), passed through unconverted.
        let e = better_match_scores_higher(&[hit("strong.md", -2.5), hit("weak.md", -0.7)], "strong.md", "weak.md").unwrap_err();
        assert!(e.contains("must be positive"), "{e}");
        // Positive, but the better match scored lower.
        let e = better_match_scores_higher(&[hit("strong.md", 0.7), hit("weak.md", 2.5)], "strong.md", "weak.md").unwrap_err();
        assert!(e.contains("higher keyword score"), "{e}");
        let e = better_match_scores_higher(&[hit("weak.md", 0.7), hit("strong.md", 2.5)], "strong.md", "weak.md").unwrap_err();
        assert!(e.contains("expected [strong.md, weak.md]"), "{e}");
    }
}
