//! The builtin engine end to end on real SQLite files: sync, search, memory_get, rebuilds.

use std::collections::HashMap;
use std::fs;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use async_trait::async_trait;
use conformance::testing::TestDirs;
use conformance::{BagOfWordsEmbedder, FnEmbedder};
use memory_builtin::BuiltinFactory;
use memory_core::embedding::{sanitize_and_normalize, EmbeddingError, EmbeddingProvider, EmbeddingPurpose};
use memory_core::indexed::IndexedBackend;
use memory_core::{Config, ErrorKind, GetRequest, MemoryBackend, SearchRequest, SyncOptions};

type Env = TestDirs;

/// Opening the builtin engine on a test's folders.
trait OpenBuiltin {
    async fn open(&self, config: Config, embedder: Option<Arc<dyn EmbeddingProvider>>) -> IndexedBackend;

    /// With the default config and no embedder.
    async fn open_keyword_only(&self) -> IndexedBackend {
        self.open(Config::default(), None).await
    }
}

impl OpenBuiltin for TestDirs {
    async fn open(&self, config: Config, embedder: Option<Arc<dyn EmbeddingProvider>>) -> IndexedBackend {
        BuiltinFactory.open_indexed(self.context(config, embedder)).await.unwrap()
    }
}

fn bump_mtime(p: &Path) {
    conformance::testing::bump_mtime(p).unwrap();
}

async fn paths(engine: &dyn MemoryBackend, q: &str) -> Vec<String> {
    engine.search(&SearchRequest::new(q)).await.unwrap().results.into_iter().map(|r| r.path).collect()
}

/// The path of the top hit for `q`.
async fn top(engine: &dyn MemoryBackend, q: &str) -> Option<String> {
    paths(engine, q).await.into_iter().next()
}

/// Folders holding the [`sample`] workspace.
fn sample_env() -> Env {
    let env = Env::new();
    sample(&env);
    env
}

/// The [`sample`] workspace indexed by the keyword-only engine.
async fn indexed_sample() -> (Env, IndexedBackend) {
    let env = sample_env();
    let e = env.open_keyword_only().await;
    e.sync(SyncOptions::default()).await.unwrap();
    (env, e)
}

fn sample(env: &Env) {
    env.write("MEMORY.md", "# Memory\n\nThe gateway runs on the Mac Studio in the office.\nAlice prefers oat milk.\n");
    env.write("memory/2026-11-28.md", "# 2026-11-28\n\n- Fixed error E4012 in the billing job\n- memory.search.provider set to local\n");
    env.write("memory/2026-11-29.md", "# 2026-11-29\n\n- Planned the aircraft wing paper with Bob\n- Deploy window moved to Friday\n");
    env.write("memory/projects/rust.md", "# Rust port\n\nSQLite with FTS5 and sqlite-vec compiled in.\n");
}

#[tokio::test]
async fn search_finds_documents_matching_some_words() {
    let env = sample_env();
    let e = env.open_keyword_only().await;
    // Never indexed: the search indexes first.
    let hits = paths(&e, "where does the gateway run these days?").await;
    assert_eq!(hits.first().map(String::as_str), Some("MEMORY.md"));
    assert_eq!(top(&e, "E4012").await.as_deref(), Some("memory/2026-11-28.md"));
    assert_eq!(top(&e, "memory.search.provider").await.as_deref(), Some("memory/2026-11-28.md"));
    // Stemming: "aircrafts" finds "aircraft".
    assert_eq!(top(&e, "aircrafts").await.as_deref(), Some("memory/2026-11-29.md"));
    let r = e.search(&SearchRequest::new("gateway")).await.unwrap();
    let hit = &r.results[0];
    assert_eq!((hit.start_line, hit.end_line), (1, 4));
    assert_eq!(hit.citation.as_deref(), Some("MEMORY.md#L1-L4"));
}

#[tokio::test]
async fn fts_syntax_in_queries_is_plain_text() {
    let (_env, e) = indexed_sample().await;
    for q in [
        "\"unbalanced",
        "gateway AND (",
        "NEAR(gateway studio)",
        "col:gateway",
        "-gateway",
        "gate*",
        "*",
        "\"\"",
        "^gateway",
        "gateway OR",
        "{x}",
        "'; DROP TABLE chunks; --",
    ] {
        let r = e.search(&SearchRequest::new(q)).await;
        assert!(r.is_ok(), "{q}: {:?}", r.err());
    }
    assert_eq!(top(&e, "NEAR(gateway studio)").await.as_deref(), Some("MEMORY.md"));
    assert_eq!(top(&e, "col:gateway").await.as_deref(), Some("MEMORY.md"));
    // The index is intact afterwards.
    assert_eq!(e.status().await.unwrap().files, 4);
}

#[tokio::test]
async fn incremental_sync_add_change_delete_rename() {
    let env = sample_env();
    let e = env.open_keyword_only().await;
    let r = e.sync(SyncOptions::default()).await.unwrap();
    assert_eq!((r.files_added, r.files_changed, r.files_removed), (4, 0, 0));

    let r = e.sync(SyncOptions::default()).await.unwrap();
    assert_eq!(r.files_unchanged, 4);
    assert!(!r.changed_anything(), "no change costs nothing: {r:?}");

    // Touch without a content change: re-hashed, not re-chunked.
    bump_mtime(&env.ws.path().join("MEMORY.md"));
    let r = e.sync(SyncOptions::default()).await.unwrap();
    assert_eq!((r.files_changed, r.chunks_written), (0, 0));

    env.write("memory/2026-11-30.md", "# 2026-11-30\n\nBought a zeppelin ticket.\n");
    env.write("memory/2026-11-29.md", "# 2026-11-29\n\n- Planned the glider paper with Bob\n");
    fs::remove_file(env.ws.path().join("memory/projects/rust.md")).unwrap();
    let r = e.sync(SyncOptions::default()).await.unwrap();
    assert_eq!((r.files_added, r.files_changed, r.files_removed), (1, 1, 1));
    assert_eq!(paths(&e, "zeppelin").await, vec!["memory/2026-11-30.md"]);
    assert!(paths(&e, "aircraft").await.is_empty());
    assert_eq!(paths(&e, "glider").await, vec!["memory/2026-11-29.md"]);
    assert!(paths(&e, "sqlite-vec").await.is_empty());

    fs::rename(env.ws.path().join("memory/2026-11-30.md"), env.ws.path().join("memory/2026-12-01.md")).unwrap();
    let r = e.sync(SyncOptions::default()).await.unwrap();
    assert_eq!((r.files_added, r.files_removed), (1, 1));
    assert_eq!(paths(&e, "zeppelin").await, vec!["memory/2026-12-01.md"]);
    assert_eq!(e.status().await.unwrap().files, 4);
}

#[tokio::test]
async fn skipped_files_are_reported_once_and_not_searched() {
    let env = sample_env();
    fs::write(env.ws.path().join("memory/bin.md"), b"gateway\0\x01\x02").unwrap();
    fs::write(env.ws.path().join("memory/latin1.md"), b"gateway caf\xe9").unwrap();
    let e = env.open_keyword_only().await;
    let r = e.sync(SyncOptions::default()).await.unwrap();
    assert_eq!(r.files_skipped, 2);
    assert_eq!(r.warnings.len(), 2);
    let r = e.sync(SyncOptions::default()).await.unwrap();
    assert_eq!(r.files_skipped, 0, "unchanged skipped files are not re-read");
    assert_eq!(paths(&e, "gateway").await, vec!["MEMORY.md"]);
    let st = e.status().await.unwrap();
    assert!(!st.dirty);
    let bin = st.skipped.iter().find(|f| f.path == "memory/bin.md").unwrap_or_else(|| panic!("{:?}", st.skipped));
    assert!(bin.reason.contains("binary"), "{bin:?}");
    assert!(st.skipped.iter().any(|f| f.path == "memory/latin1.md"), "{:?}", st.skipped);
    assert!(!st.warnings.iter().any(|w| w.contains("memory/bin.md")), "said once, in `skipped`: {:?}", st.warnings);
}

#[tokio::test]
async fn identity_change_rebuilds_beside_the_live_index() {
    let (env, e) = indexed_sample().await;
    let index = e.status().await.unwrap().index_path.unwrap();
    drop(e);

    let mut config = Config::default();
    config.memory.search.chunking.tokens = 64;
    config.memory.search.chunking.overlap = 8;
    let e = env.open(config, None).await;
    let st = e.status().await.unwrap();
    assert!(st.warnings.iter().any(|w| w.contains("chunking")), "{:?}", st.warnings);
    let r = e.sync(SyncOptions::default()).await.unwrap();
    assert!(r.rebuilt);
    assert_eq!(r.files_added, 4);
    let rebuilt = e.status().await.unwrap().index_path.unwrap();
    assert_eq!(rebuilt, format!("{index}.g1"), "the next generation is live");
    assert!(Path::new(&index).exists(), "the previous generation stays for readers that opened it just before the switch");
    assert_eq!(top(&e, "gateway").await.as_deref(), Some("MEMORY.md"));
    // Reopen: identity matches now, nothing to rebuild.
    let r = e.sync(SyncOptions::default()).await.unwrap();
    assert!(!r.rebuilt && !r.changed_anything());
    assert!(Path::new(&index).exists(), "kept a while after the switch");
    // A minute after the switch, a sync removes it: it was only space (an index of the old model's vectors kept
    // beside the new one until the next rebuild).
    let pointer = format!("{index}.current");
    std::fs::File::options()
        .write(true)
        .open(&pointer)
        .and_then(|f| f.set_modified(std::time::SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_577_836_800)))
        .unwrap();
    e.sync(SyncOptions::default()).await.unwrap();
    assert!(!Path::new(&index).exists(), "the previous generation stayed");
    assert_eq!(top(&e, "gateway").await.as_deref(), Some("MEMORY.md"));
    // A forced rebuild also goes through staging, and keeps the previous generation for a while.
    let r = e.sync(SyncOptions { force: true, ..SyncOptions::default() }).await.unwrap();
    assert!(r.rebuilt);
    assert_eq!(e.status().await.unwrap().files, 4);
    assert!(Path::new(&format!("{index}.g1")).exists() && Path::new(&format!("{index}.g2")).exists());
}

/// `staleFiles` in status counts what the next search would sync: changed, new and deleted files, and paths a
/// host announced even when their size and mtime did not move.
#[tokio::test]
async fn status_counts_the_files_the_next_search_would_sync() {
    let (env, e) = indexed_sample().await;
    let stale = |st: memory_core::Status| st.extra.get("staleFiles").and_then(serde_json::Value::as_u64);
    assert_eq!(stale(e.status().await.unwrap()), Some(0));
    env.write("memory/2026-11-30.md", "- new\n");
    fs::remove_file(env.ws.path().join("memory/2026-11-29.md")).unwrap();
    assert_eq!(stale(e.status().await.unwrap()), Some(2));
    e.notify_changed(&[std::path::PathBuf::from("MEMORY.md")]);
    assert_eq!(stale(e.status().await.unwrap()), Some(3));
    e.search(&SearchRequest::new("new")).await.unwrap();
    assert_eq!(stale(e.status().await.unwrap()), Some(0));
    // A sync of every file (the watcher's) reads what was announced by content and answers for it.
    e.notify_changed(&[env.ws.path().join("MEMORY.md")]);
    assert_eq!(stale(e.status().await.unwrap()), Some(1));
    let r = e.sync(SyncOptions::default()).await.unwrap();
    assert_eq!(r.files_changed + r.files_added, 0, "{r:?}");
    assert_eq!(stale(e.status().await.unwrap()), Some(0));
}

/// Two engines on one index, as two processes are (`memory serve` and a `memory index --force` in a terminal):
/// after one swaps in a rebuilt generation, the other searches and writes the new one, not the replaced one.
#[tokio::test]
async fn an_engine_follows_a_rebuild_swapped_in_by_another() {
    let env = sample_env();
    let mut config = Config::default();
    config.memory.search.sync.on_search = false;
    let serve = env.open(config.clone(), None).await;
    serve.sync(SyncOptions::default()).await.unwrap();
    let terminal = env.open(config.clone(), None).await;
    for _ in 0..2 {
        // Twice: the second rebuild deletes the generation the first engine opened.
        assert!(terminal.sync(SyncOptions { force: true, ..SyncOptions::default() }).await.unwrap().rebuilt);
    }
    let live = terminal.status().await.unwrap().index_path.unwrap();
    assert_eq!(serve.status().await.unwrap().index_path.unwrap(), live, "status names the new generation");

    env.write("memory/2026-11-30.md", "- The cat is named Miso.\n");
    let r = serve.sync(SyncOptions::default()).await.unwrap();
    assert_eq!(r.files_added, 1);
    assert_eq!(paths(&terminal, "Miso").await, ["memory/2026-11-30.md"], "the write went into the live generation");
    fs::remove_file(env.ws.path().join("memory/2026-11-29.md")).unwrap();
    terminal.sync(SyncOptions::default()).await.unwrap();
    assert!(paths(&serve, "aircraft").await.is_empty(), "the other engine's removal is seen");
}

#[tokio::test]
async fn interrupted_rebuild_leaves_the_live_index_usable() {
    let (env, e) = indexed_sample().await;
    let index = e.status().await.unwrap().index_path.unwrap();
    drop(e);
    // A crash mid-rebuild leaves a half-written next generation behind.
    fs::write(format!("{index}.g1"), b"half written garbage").unwrap();
    fs::write(format!("{index}.g1-wal"), b"more garbage").unwrap();
    let e = env.open_keyword_only().await;
    assert_eq!(top(&e, "gateway").await.as_deref(), Some("MEMORY.md"));
    // The next sync removes what the interrupted rebuild left.
    env.write("memory/2026-11-30.md", "- a new note\n");
    e.sync(SyncOptions::default()).await.unwrap();
    assert!(!Path::new(&format!("{index}.g1")).exists() && !Path::new(&format!("{index}.g1-wal")).exists());
    let r = e.sync(SyncOptions { force: true, ..SyncOptions::default() }).await.unwrap();
    assert!(r.rebuilt);
    assert_eq!(top(&e, "gateway").await.as_deref(), Some("MEMORY.md"));
    assert_eq!(e.status().await.unwrap().files, 5);
}

#[tokio::test]
async fn corrupt_index_file_is_detected_and_rebuilt() {
    let (env, e) = indexed_sample().await;
    let index = e.status().await.unwrap().index_path.unwrap();
    e.close().await.unwrap();
    drop(e);
    fs::write(&index, vec![0x42u8; 8192]).unwrap();
    let _ = fs::remove_file(format!("{index}-wal"));
    let e = env.open_keyword_only().await;
    assert_eq!(top(&e, "gateway").await.as_deref(), Some("MEMORY.md"));
    let aside: Vec<_> = fs::read_dir(Path::new(&index).parent().unwrap())
        .unwrap()
        .flatten()
        .filter(|f| f.file_name().to_string_lossy().contains(".corrupt-"))
        .collect();
    assert_eq!(aside.len(), 1, "the broken file is kept aside for inspection");
}

#[tokio::test]
async fn memory_get_refusals_and_missing_daily_log() {
    let env = sample_env();
    fs::write(env.ws.path().join("secret.txt"), "s").unwrap();
    let e = env.open_keyword_only().await;
    let get = |p: &str| GetRequest { path: p.into(), from: None, lines: None, offset: None };
    assert_eq!(e.get(&get("memory/2026-11-28.md")).await.unwrap().total_lines, 4);
    let r = e.get(&GetRequest { path: "MEMORY.md".into(), from: Some(3), lines: Some(1), offset: None }).await.unwrap();
    assert_eq!(r.text, "The gateway runs on the Mac Studio in the office.");
    for bad in ["../secret.txt", "/etc/passwd", "secret.txt", "memory/../../x.md"] {
        assert_eq!(e.get(&get(bad)).await.unwrap_err().kind(), ErrorKind::Refused, "{bad}");
    }
    let missing = e.get(&get("memory/2031-01-01.md")).await.unwrap();
    assert!(missing.missing && missing.text.is_empty());
}

#[tokio::test]
async fn reset_deletes_the_index_not_the_notes() {
    let (env, e) = indexed_sample().await;
    e.reset().await.unwrap();
    assert_eq!(e.status().await.unwrap().files, 0);
    assert!(env.ws.path().join("MEMORY.md").exists());
    assert_eq!(top(&e, "gateway").await.as_deref(), Some("MEMORY.md"));
}

/// The provider fingerprint an engine caches for its live index is the swapped-in index's after another process
/// rebuilt it with other embedding settings: its query vectors are never compared with vectors of another model.
#[tokio::test]
async fn the_cached_index_fingerprint_follows_a_rebuild_by_another_engine() {
    let env = sample_env();
    let mut config = Config::default();
    config.memory.search.sync.on_search = false;
    let wide = Arc::new(BagOfWordsEmbedder::new(64));
    let serve = env.open(config.clone(), Some(wide)).await;
    serve.sync(SyncOptions::default()).await.unwrap();
    let res = serve.search(&SearchRequest::new("oat milk")).await.unwrap();
    assert_eq!(res.mode.as_deref(), Some("hybrid"), "the fingerprint of its own index is cached now");

    let narrow = Arc::new(BagOfWordsEmbedder::new(32));
    let other = env.open(config, Some(narrow)).await;
    assert!(other.sync(SyncOptions::default()).await.unwrap().rebuilt);
    let res = serve.search(&SearchRequest::new("oat milk")).await.unwrap();
    assert_eq!(res.mode.as_deref(), Some("keyword"), "{:?}", res.warnings);
    assert!(res.warnings.iter().any(|w| w.contains("other embedding settings")), "{:?}", res.warnings);
    assert_eq!(res.results[0].path, "MEMORY.md");
}

#[tokio::test]
async fn vectors_are_stored_searched_and_cached() {
    let env = sample_env();
    let emb = Arc::new(BagOfWordsEmbedder::new(64));
    let e = env.open(Config::default(), Some(emb.clone())).await;
    let r = e.sync(SyncOptions::default()).await.unwrap();
    assert_eq!(r.chunks_embedded, 4);
    assert!(e.capabilities().hybrid);
    let res = e.search(&SearchRequest::new("oat milk")).await.unwrap();
    assert_eq!(res.mode.as_deref(), Some("hybrid"));
    assert_eq!(res.results[0].path, "MEMORY.md");
    assert!(res.results[0].vector_score.unwrap() > 0.0);

    // A forced rebuild with the same provider re-embeds nothing.
    let before = emb.texts();
    let r = e.sync(SyncOptions { force: true, ..SyncOptions::default() }).await.unwrap();
    assert!(r.rebuilt);
    assert_eq!(r.chunks_embedded, 0);
    assert_eq!(r.embeddings_cached, 4);
    assert_eq!(emb.texts(), before, "no document embedding calls");
    let res = e.search(&SearchRequest::new("oat milk")).await.unwrap();
    assert_eq!(res.results[0].path, "MEMORY.md");

    // A different width rebuilds beside the live index with the new dimensions.
    drop(e);
    let emb2 = Arc::new(BagOfWordsEmbedder::new(32));
    let e = env.open(Config::default(), Some(emb2.clone())).await;
    let r = e.sync(SyncOptions::default()).await.unwrap();
    assert!(r.rebuilt);
    assert_eq!(r.chunks_embedded, 4);
    assert_eq!(e.search(&SearchRequest::new("oat milk")).await.unwrap().results[0].path, "MEMORY.md");
}

/// A local model that goes missing (a cache cleaned) has a stand-in ([`memory_core::embedding::Unavailable`]): the
/// index and its vectors are kept (not rebuilt for "other settings"), searches answer by their words saying why, a
/// note written meanwhile is found by its words, and once the model is back only that note is embedded.
#[tokio::test]
async fn a_stand_in_for_a_missing_model_keeps_the_index_and_answers_by_words() {
    let env = sample_env();
    let mut config = Config::default();
    config.memory.search.sync.on_search = true;
    let model = Arc::new(BagOfWordsEmbedder::new(64));
    let e = env.open(config.clone(), Some(model.clone())).await;
    assert_eq!(e.sync(SyncOptions::default()).await.unwrap().chunks_embedded, 4);
    drop(e);

    let why = "memory.search.local.modelPath: model folder /models/gone not found";
    let stand_in = Arc::new(memory_core::embedding::Unavailable::new(model.id(), "gone", why));
    let e = env.open(config.clone(), Some(stand_in)).await;
    let res = e.search(&SearchRequest::new("oat milk")).await.unwrap();
    assert_eq!(res.results[0].path, "MEMORY.md", "{res:?}");
    assert!(res.warnings.iter().any(|w| w.contains(why)), "the reason is said: {:?}", res.warnings);
    fs::write(env.ws.path().join("memory/2026-12-03.md"), "- The new router sits in the hallway closet\n").unwrap();
    let res = e.search(&SearchRequest::new("router")).await.unwrap();
    assert_eq!(res.results.first().map(|r| r.path.as_str()), Some("memory/2026-12-03.md"), "found by its words at once: {res:?}");
    let r = e.sync(SyncOptions::default()).await.unwrap();
    assert!(!r.rebuilt, "the index is kept with its vectors");
    assert_eq!(r.files_pending, 1, "the new note waits for its embedding: {r:?}");
    let status = e.status().await.unwrap();
    assert!(status.warnings.iter().all(|w| !w.contains("identity")), "{:?}", status.warnings);
    drop(e);

    let before = model.texts();
    let e = env.open(config, Some(model.clone())).await;
    let r = e.sync(SyncOptions::default()).await.unwrap();
    assert!(!r.rebuilt);
    assert_eq!((r.chunks_embedded, model.texts() - before), (1, 1), "only the note written meanwhile is embedded");
    assert_eq!(r.files_pending, 0);
    let res = e.search(&SearchRequest::new("router hallway")).await.unwrap();
    assert_eq!(res.mode.as_deref(), Some("hybrid"));
    assert!(res.results[0].path == "memory/2026-12-03.md" && res.results[0].vector_score.is_some_and(|v| v > 0.0), "{res:?}");
}

/// A long-running process (`memory serve`) with a stand-in answers with vectors again once the same model is back,
/// without a restart; a folder that now holds another model is not used (the index holds the old one's vectors).
#[tokio::test]
async fn a_stand_in_uses_the_model_again_once_the_same_one_is_back() {
    use memory_core::embedding::{Reload, Unavailable};
    let env = sample_env();
    let model = Arc::new(BagOfWordsEmbedder::new(64));
    let e = env.open(Config::default(), Some(model.clone())).await;
    e.sync(SyncOptions::default()).await.unwrap();
    drop(e);
    let why = "memory.search.local.modelPath: model folder /models/gone not found";
    let notes = [
        ("memory/2026-12-03.md", "- The new router sits in the hallway closet\n"),
        ("memory/2026-12-04.md", "- The old modem went back to the shop\n"),
    ];
    for (same, want, (note, text)) in [(true, "hybrid", notes[0]), (false, "keyword", notes[1])] {
        let back = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let returned: Arc<dyn EmbeddingProvider> = if same { model.clone() } else { Arc::new(BagOfWordsEmbedder::new(32)) };
        let flag = back.clone();
        let reload: Reload =
            Box::new(move || if flag.load(Ordering::SeqCst) { Ok(returned.clone()) } else { Err("model folder /models/gone not found".into()) });
        let stand_in = Unavailable::new(model.id(), "gone", why).with_reload(reload, std::time::Duration::ZERO);
        let e = env.open(Config::default(), Some(Arc::new(stand_in))).await;
        assert_eq!(e.search(&SearchRequest::new("oat milk")).await.unwrap().mode.as_deref(), Some("keyword"));
        fs::write(env.ws.path().join(note), text).unwrap();
        let r = e.sync(SyncOptions::default()).await.unwrap();
        assert_eq!(r.files_pending, 1, "written while the model is away: {r:?}");
        back.store(true, Ordering::SeqCst);
        let res = e.search(&SearchRequest::new("oat milk")).await.unwrap();
        assert_eq!(res.mode.as_deref(), Some(want), "same model back: {same}; {:?}", res.warnings);
        assert_eq!(res.results[0].path, "MEMORY.md");
        // The sync a long-running process runs while files wait (the watcher's) embeds the note once the same
        // model is back; with another model the note waits on.
        let r = e.sync(SyncOptions::default()).await.unwrap();
        assert!(!r.rebuilt, "never rebuilt by the stand-in");
        assert_eq!((r.files_pending, r.chunks_embedded > 0), if same { (0, true) } else { (1, false) }, "{r:?}");
        fs::remove_file(env.ws.path().join(note)).unwrap();
    }
}

/// Fails every call: keyword search must still answer, and the failure is reported.
fn down_embedder() -> FnEmbedder {
    FnEmbedder::batches("none", 8, |_| Err(EmbeddingError::Transient { provider: "down".into(), message: "connection refused".into() }))
        .with_identity("down", "down")
}

#[tokio::test]
async fn keyword_search_answers_when_embeddings_fail() {
    let env = sample_env();
    let e = env.open(Config::default(), Some(Arc::new(down_embedder()))).await;
    let r = e.sync(SyncOptions::default()).await.unwrap();
    assert!(r.warnings.iter().any(|w| w.contains("embedding failed")));
    assert_eq!(r.files_pending, 4, "every file waits for its embeddings: {r:?}");
    let res = e.search(&SearchRequest::new("gateway")).await.unwrap();
    assert_eq!(res.mode.as_deref(), Some("keyword"));
    assert_eq!(res.results[0].path, "MEMORY.md");
    assert!(res.warnings.iter().any(|w| w.contains("embeddings unavailable")));
    let st = e.status().await.unwrap();
    assert!(st.warnings.iter().any(|w| w.contains("waiting for embeddings")), "{:?}", st.warnings);
}

/// Notes left waiting for their vectors (a first build or an outage) are `memory index`'s and the watcher's to
/// complete, not a search's: a search after a note was written embeds that note alone. It embedded every waiting
/// note first, within its few seconds' wait: with a local model and a few hundred notes waiting (80 s of work)
/// each search after a write spent 6.7 s on them, gave up, and the note just written got no vector either.
#[tokio::test]
async fn a_search_embeds_the_note_just_written_not_the_notes_waiting_for_vectors() {
    let env = sample_env();
    let embedder = Arc::new(DelayedEmbedder::new(Arc::new(BagOfWordsEmbedder::new(64)), std::time::Duration::ZERO));
    embedder.down.store(true, Ordering::SeqCst);
    let e = env.open(Config::default(), Some(embedder.clone())).await;
    let r = e.sync(SyncOptions::default()).await.unwrap();
    assert_eq!(r.files_pending, 4, "{r:?}");

    embedder.down.store(false, Ordering::SeqCst);
    env.write("memory/2026-12-04.md", "- The new router sits in the hallway closet\n");
    let res = e.search(&SearchRequest::new("router hallway")).await.unwrap();
    // The note written, and the provider's unrelated-text probes (never embedded while it was down); no other note.
    let embedded = std::mem::take(&mut *embedder.documents.lock().unwrap());
    assert!(embedded.iter().any(|t| t.contains("hallway closet")), "{embedded:?}");
    let waiting = ["Mac Studio", "E4012", "aircraft wing", "sqlite-vec"];
    assert!(!embedded.iter().any(|t| waiting.iter().any(|w| t.contains(w))), "the search embedded notes waiting for vectors: {embedded:?}");
    assert_eq!(res.mode.as_deref(), Some("hybrid"), "{:?}", res.warnings);
    assert!(res.results[0].path == "memory/2026-12-04.md" && res.results[0].vector_score.is_some(), "{res:?}");
    assert!(e.status().await.unwrap().warnings.iter().any(|w| w.contains("4 files are waiting for embeddings")));
    // So does the sync of an append (`memory_append`): the entry, not the backlog.
    env.write("memory/2026-12-04.md", "- The new router sits in the hallway closet\n- The old modem went to recycling\n");
    let r = e.sync(SyncOptions::agent_call()).await.unwrap();
    let embedded = std::mem::take(&mut *embedder.documents.lock().unwrap());
    assert!(embedded.iter().any(|t| t.contains("old modem")), "{embedded:?}");
    assert!(!embedded.iter().any(|t| waiting.iter().any(|w| t.contains(w))), "the append's sync embedded the backlog: {embedded:?}");
    assert_eq!((r.files_changed, r.files_pending), (1, 0), "{r:?}");

    // `memory index` (or the watcher) completes them.
    let r = e.sync(SyncOptions::default()).await.unwrap();
    assert_eq!((r.files_pending, r.chunks_embedded), (0, 4), "{r:?}");
}

/// Embeds as `inner` does, each call `delay` late: a provider under load, or one that stopped answering (a
/// network that drops packets: a delay longer than any test waits); while `down`, fails at once. Keeps the
/// document texts it embedded.
struct DelayedEmbedder {
    inner: Arc<BagOfWordsEmbedder>,
    delay: std::sync::Mutex<std::time::Duration>,
    down: std::sync::atomic::AtomicBool,
    documents: std::sync::Mutex<Vec<String>>,
}

impl DelayedEmbedder {
    fn new(inner: Arc<BagOfWordsEmbedder>, delay: std::time::Duration) -> DelayedEmbedder {
        DelayedEmbedder { inner, delay: delay.into(), down: false.into(), documents: Default::default() }
    }

    fn set_delay(&self, delay: std::time::Duration) {
        *self.delay.lock().unwrap() = delay;
    }
}

#[async_trait]
impl EmbeddingProvider for DelayedEmbedder {
    fn id(&self) -> &str {
        self.inner.id()
    }
    fn model(&self) -> &str {
        self.inner.model()
    }
    fn dimensions(&self) -> Option<usize> {
        self.inner.dimensions()
    }
    fn fingerprint(&self) -> String {
        self.inner.fingerprint()
    }
    async fn embed(&self, texts: &[String], purpose: EmbeddingPurpose) -> Result<Vec<Vec<f32>>, EmbeddingError> {
        if self.down.load(Ordering::SeqCst) {
            return Err(EmbeddingError::Transient { provider: "test".into(), message: "connection refused".into() });
        }
        let delay = *self.delay.lock().unwrap();
        tokio::time::sleep(delay).await;
        if purpose == EmbeddingPurpose::Document {
            self.documents.lock().unwrap().extend(texts.iter().cloned());
        }
        self.inner.embed(texts, purpose).await
    }
}

/// A sync beside searches (the watcher's) embeds outside the index's locks: a search meanwhile syncs the note
/// written a moment ago and finds it at once, instead of waiting for the provider behind the sync.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_search_during_the_watcher_s_embedding_finds_the_note_written_a_moment_ago() {
    use std::time::{Duration, Instant};
    let env = sample_env();
    let model = Arc::new(BagOfWordsEmbedder::new(64));
    env.open(Config::default(), Some(model.clone())).await.sync(SyncOptions::default()).await.unwrap();
    let embedder = Arc::new(DelayedEmbedder::new(model, Duration::from_secs(8)));
    let e = Arc::new(env.open(Config::default(), Some(embedder)).await);
    env.write("memory/2026-12-04.md", "- Met Priya about the quarterly budget\n");
    let beside = SyncOptions::beside_searches();
    let watcher = tokio::spawn({
        let e = e.clone();
        async move { e.sync(beside).await.unwrap() }
    });
    // The watcher's sync is embedding (8 s a call: longer than a search waits for another sync) when the agent
    // writes and searches. The search's own embedding of that note is given up within its wait.
    tokio::time::sleep(Duration::from_millis(500)).await;
    env.write("memory/2026-12-05.md", "- The spare router sits in the hallway closet\n");
    let started = Instant::now();
    let res = e.search(&SearchRequest::new("spare router")).await.unwrap();
    assert_eq!(res.results.first().map(|r| r.path.as_str()), Some("memory/2026-12-05.md"), "{res:?}");
    assert!(res.warnings.iter().all(|w| !w.contains("not in the index yet")), "{:?}", res.warnings);
    assert!(started.elapsed() < Duration::from_secs(7), "{:?}", started.elapsed());
    let r = watcher.await.unwrap();
    assert_eq!(r.chunks_embedded, 1, "the watcher's note has its vector: {r:?}");
}

/// An agent's search never waits long for a provider that does not answer: the search answers by its words within
/// the wait (`patience::EMBED_WAIT`), the next ones at once (paused), a note written meanwhile is found by its words
/// and waits for its vectors; the next sync nobody waits for (the watcher's) embeds it and ends the pause.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_provider_that_does_not_answer_costs_one_search_a_few_seconds_not_every_search_minutes() {
    use memory_core::indexed::patience::EMBED_WAIT;
    use std::time::{Duration, Instant};
    let env = sample_env();
    let embedder = Arc::new(DelayedEmbedder::new(Arc::new(BagOfWordsEmbedder::new(64)), Duration::ZERO));
    let e = env.open(Config::default(), Some(embedder.clone())).await;
    e.sync(SyncOptions::default()).await.unwrap();
    assert_eq!(e.search(&SearchRequest::new("oat milk")).await.unwrap().mode.as_deref(), Some("hybrid"));

    // Longer than any test waits: a request timeout and its retries.
    embedder.set_delay(Duration::from_secs(600));
    env.write("memory/2026-12-04.md", "- The new router sits in the hallway closet\n");
    let started = Instant::now();
    let res = e.search(&SearchRequest::new("router")).await.unwrap();
    let took = started.elapsed();
    assert!(took >= EMBED_WAIT && took < EMBED_WAIT + Duration::from_secs(3), "the search waited {took:?}");
    assert_eq!((res.mode.as_deref(), res.results[0].path.as_str()), (Some("keyword"), "memory/2026-12-04.md"), "{res:?}");
    assert!(res.warnings.iter().any(|w| w.contains("did not answer in time")), "{:?}", res.warnings);
    // The next searches do not wait for it: it failed slowly moments ago.
    env.write("memory/2026-12-05.md", "- The spare modem went back to the shop\n");
    let started = Instant::now();
    let res = e.search(&SearchRequest::new("modem")).await.unwrap();
    assert!(started.elapsed() < Duration::from_secs(2), "waited again: {:?}", started.elapsed());
    assert_eq!(res.results[0].path, "memory/2026-12-05.md", "found by its words: {res:?}");
    assert!(res.warnings.iter().any(|w| w.contains("not waited for again")), "{:?}", res.warnings);
    assert!(e.status().await.unwrap().warnings.iter().any(|w| w.contains("waiting for embeddings")));
    // A background sync beside searches (the watcher's) does not hold the index waiting for it either.
    let started = Instant::now();
    let beside = SyncOptions::beside_searches();
    let r = e.sync(beside).await.unwrap();
    assert!(started.elapsed() < Duration::from_secs(2) && r.files_pending == 2, "{:?} {r:?}", started.elapsed());

    // The provider answers again: a sync that waits for it (`memory index`; the watcher's retry once the pause is
    // over) embeds the two notes and ends the pause, and searches use vectors again.
    embedder.set_delay(Duration::ZERO);
    let r = e.sync(SyncOptions::default()).await.unwrap();
    assert_eq!((r.files_pending, r.chunks_embedded), (0, 2), "{r:?}");
    let res = e.search(&SearchRequest::new("router hallway")).await.unwrap();
    assert_eq!(res.mode.as_deref(), Some("hybrid"), "{:?}", res.warnings);
    assert!(res.results[0].path == "memory/2026-12-04.md" && res.results[0].vector_score.is_some(), "{res:?}");
}

#[tokio::test]
async fn chinese_and_japanese_words_are_found() {
    let env = Env::new();
    env.write("memory/2026-11-20.md", "# 周报\n\n本周完成了支付系统的灰度发布，下周继续观察。\n");
    env.write("memory/2026-11-21.md", "# 生活\n\n早上和小王在公司楼下喝咖啡，聊了猫的事情。\n");
    env.write("memory/2026-11-22.md", "# 出張\n\n来週は東京で打ち合わせがあります。\n");
    env.write("memory/2026-11-23.md", "# Deploy\n\nKubernetes canary rollout for the billing service.\n");
    let e = env.open_keyword_only().await;
    assert_eq!(top(&e, "咖啡").await.as_deref(), Some("memory/2026-11-21.md"));
    assert_eq!(top(&e, "周报").await.as_deref(), Some("memory/2026-11-20.md"));
    assert_eq!(top(&e, "東京").await.as_deref(), Some("memory/2026-11-22.md"));
    assert_eq!(top(&e, "猫").await.as_deref(), Some("memory/2026-11-21.md"));
    assert_eq!(top(&e, "上周的灰度发布怎么样了？").await.as_deref(), Some("memory/2026-11-20.md"));
    let mixed = paths(&e, "Kubernetes 灰度发布").await;
    assert!(mixed.contains(&"memory/2026-11-20.md".to_string()) && mixed.contains(&"memory/2026-11-23.md".to_string()), "{mixed:?}");
}

#[tokio::test]
async fn a_query_equal_to_a_path_name_or_stem_ranks_that_file_first() {
    let env = sample_env();
    env.write("memory/notes-about-rust.md", "# Rust\n\nrust rust rust rust: this note mentions rust more often.\n");
    let e = env.open_keyword_only().await;
    assert_eq!(paths(&e, "memory/projects/rust.md").await[0], "memory/projects/rust.md");
    assert_eq!(paths(&e, "rust.md").await[0], "memory/projects/rust.md");
    assert_eq!(paths(&e, "rust").await[0], "memory/projects/rust.md", "the stem beats a note that only mentions it");
    assert_eq!(paths(&e, "2026-11-28").await[0], "memory/2026-11-28.md");
    assert_eq!(paths(&e, "MEMORY.md").await[0], "MEMORY.md");
}

/// Questions get Rocchio feedback on the query vector: a note that shares no word with the question, but the
/// vocabulary of its best hits, gets a vector score; a short query (no feedback) leaves it at zero.
#[tokio::test]
async fn question_vectors_take_feedback_from_the_best_hits() {
    let env = Env::new();
    for i in 0..10 {
        env.write(&format!("memory/gateway-{i}.md"), &format!("# Gateway {i}\n\nThe gateway process runs on the studio rack machine {i}.\n"));
    }
    env.write("memory/inventory.md", "# Inventory\n\nStudio rack inventory list.\n");
    env.write("memory/unrelated.md", "# Lunch\n\nNoodles cafeteria menu.\n");
    let emb = Arc::new(BagOfWordsEmbedder::new(512));
    let e = env.open(Config::default(), Some(emb)).await;
    e.sync(SyncOptions::default()).await.unwrap();
    let vector_score = |q: &'static str| {
        let e = &e;
        async move {
            let req = SearchRequest { max_results: Some(20), min_score: Some(0.0), ..SearchRequest::new(q) };
            let res = e.search(&req).await.unwrap();
            assert_eq!(res.mode.as_deref(), Some("hybrid"));
            res.results.iter().find(|r| r.path == "memory/inventory.md").and_then(|r| r.vector_score).unwrap_or(0.0)
        }
    };
    // "which machine hosts the gateway process": four content words, none of them in the inventory note.
    let with_feedback = vector_score("which machine hosts the gateway process").await;
    assert!(with_feedback > 0.05, "inventory note's vector score with feedback: {with_feedback}");
    let without = vector_score("gateway process").await;
    assert!(without < 0.01, "inventory note's vector score without feedback: {without}");
    // The unrelated note shares nothing with the question or its best hits either way.
    let req = SearchRequest { max_results: Some(20), min_score: Some(0.0), ..SearchRequest::new("which machine hosts the gateway process") };
    let res = e.search(&req).await.unwrap();
    let lunch = res.results.iter().find(|r| r.path == "memory/unrelated.md").and_then(|r| r.vector_score).unwrap_or(0.0);
    assert!(lunch < 0.01, "unrelated note: {lunch}");
}

/// The vector leg's feedback carries the keyword leg's evidence, in proportion to how much of the question the
/// keyword leg's best match holds: a search that weighs no keyword leg (`textWeight` 0) refines nothing, and the
/// note that shares only the best hits' vocabulary keeps no vector score; with the keyword leg, it gets one.
#[tokio::test]
async fn the_vector_leg_takes_feedback_only_beside_the_keyword_leg() {
    let env = Env::new();
    for i in 0..10 {
        env.write(&format!("memory/gateway-{i}.md"), &format!("# Gateway {i}\n\nThe gateway process runs on the studio rack machine {i}.\n"));
    }
    env.write("memory/inventory.md", "# Inventory\n\nStudio rack inventory list.\n");
    let inventory_score = |text_weight: f64| {
        let env = &env;
        async move {
            let mut config = Config::default();
            config.memory.search.query.hybrid.vector_weight = 1.0;
            config.memory.search.query.hybrid.text_weight = text_weight;
            let e = env.open(config, Some(Arc::new(BagOfWordsEmbedder::new(512)))).await;
            e.sync(SyncOptions::default()).await.unwrap();
            let req = SearchRequest { max_results: Some(20), min_score: Some(0.0), ..SearchRequest::new("which machine hosts the gateway process") };
            let res = e.search(&req).await.unwrap();
            e.close().await.unwrap();
            res.results.iter().find(|r| r.path == "memory/inventory.md").and_then(|r| r.vector_score).unwrap_or(0.0)
        }
    };
    let alone = inventory_score(0.0).await;
    assert!(alone < 0.01, "vector leg alone: no feedback, inventory note's vector score {alone}");
    let beside = inventory_score(0.3).await;
    assert!(beside > 0.05, "beside the keyword leg: feedback, inventory note's vector score {beside}");
}

/// An embedder whose vectors bunch, like multilingual-e5's: each is 0.97 x one shared direction plus 0.24 x a
/// bag of words, so unrelated texts have a cosine of 0.94 and the same text 1. Words are hashed like
/// `conformance::BagOfWordsEmbedder`'s, with a few garden words taken for one meaning (what a real model knows and keyword
/// search does not).
fn bunched_embedder() -> FnEmbedder {
    let (shared, own) = (0.97f32, (1.0f32 - 0.97 * 0.97).sqrt());
    FnEmbedder::new("bunched", 64, move |t| {
        let mut words = vec![0f32; 64];
        for w in t.to_lowercase().split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()) {
            let w = if ["plants", "garden", "tomatoes", "irrigation", "watering"].contains(&w) { "garden" } else { w };
            let h = memory_core::sha256_hex(w.as_bytes());
            words[1 + usize::from_str_radix(&h[..8], 16).unwrap() % 63] += 1.0;
        }
        sanitize_and_normalize(&mut words);
        words[0] = shared;
        words[1..].iter_mut().for_each(|x| *x *= own);
        words
    })
}

/// With a model whose cosines bunch, the vector leg counts from the model's similarity of unrelated text (its
/// mean cosine with fixed probe sentences), not from 0: the note the vectors clearly prefer beats a note that
/// only shares one word with the query. Raw cosines (0.98 against 0.94) let the keyword match win. The probes
/// are embedded by the sync and kept in the index: a search in a new process embeds only its query.
#[tokio::test]
async fn a_bunched_models_vector_leg_counts_from_its_unrelated_text_similarity() {
    let env = Env::new();
    env.write("memory/garden.md", "# Garden\n\nIrrigation for the tomatoes runs at dawn in the garden.\n");
    env.write("memory/bills.md", "# Bills\n\nThe water bill payment reminder is due on the first.\n");
    // Other notes make `water` a rare word: its keyword match counts (BM25's idf is ~0 among two notes).
    for (i, topic) in ["roadmap", "hiring", "budget", "offsite", "security", "billing", "design", "support"].iter().enumerate() {
        env.write(&format!("memory/n{i}.md"), &format!("# Meeting {i}\n\nWe talked about the {topic} plans for next quarter.\n"));
    }
    let emb = Arc::new(bunched_embedder());
    let e = env.open(Config::default(), Some(emb.clone())).await;
    e.sync(SyncOptions::default()).await.unwrap();
    drop(e);

    let calls = emb.calls();
    let e = env.open(Config::default(), Some(emb.clone())).await;
    let res = e.search(&SearchRequest::new("plants watering")).await.unwrap();
    assert_eq!(res.mode.as_deref(), Some("hybrid"), "{:?}", res.warnings);
    assert_eq!(res.results.first().map(|r| r.path.as_str()), Some("memory/garden.md"), "{:?}", res.results);
    assert_eq!(emb.calls(), calls + 1, "a search embeds its query only");
}

/// A long-lived engine (`memory serve`, a host) answers later searches from its change journal when nothing
/// changed. Random sequences of what agents and users do between searches (new notes and folders, appends,
/// same-size rewrites that keep the mtime, renames of files and folders, deletes, the root file), each followed
/// by searches for every word written so far: a word in a file is found there, a word no longer in any file is
/// not. The seed is fixed, so CI runs the same sequences every time.
#[tokio::test]
async fn a_long_lived_engine_sees_every_change_between_searches() {
    use std::collections::BTreeMap;
    for seed in [0x9e37_79b9_7f4a_7c15u64, 0x2545_f491_4f6c_dd1d, 0x1234_5678_9abc_def1] {
        let env = Env::new();
        let ws = env.ws.path().to_path_buf();
        let e = env.open_keyword_only().await;
        let mut rng = conformance::testing::Xorshift(seed);
        // Workspace-relative file -> the words it holds, one per line.
        let mut files: BTreeMap<String, Vec<String>> = BTreeMap::new();
        let mut gone: Vec<String> = Vec::new();
        let mut next_word = 0usize;
        let mut word = || {
            next_word += 1;
            format!("w{next_word:05}q")
        };
        let text = |words: &[String]| words.iter().map(|w| format!("- {w}\n")).collect::<String>();
        for step in 0..70 {
            let folders: Vec<String> = {
                let mut f: Vec<String> = files.keys().filter_map(|k| k.rsplit_once('/').map(|(d, _)| d.to_string())).collect();
                f.push("memory".into());
                f.sort();
                f.dedup();
                f
            };
            let keys: Vec<String> = files.keys().cloned().collect();
            let pick = |rng: &mut conformance::testing::Xorshift, v: &[String]| v[rng.below(v.len() as u64) as usize].clone();
            let op = if keys.is_empty() { 0 } else { rng.below(9) };
            let what = match op {
                0 | 1 => {
                    // A new note, sometimes in a new folder.
                    let dir = if rng.below(3) == 0 { format!("{}/f{step}", pick(&mut rng, &folders)) } else { pick(&mut rng, &folders) };
                    let rel = format!("{dir}/n{step}.md");
                    let words = vec![word()];
                    fs::create_dir_all(ws.join(&dir)).unwrap();
                    fs::write(ws.join(&rel), text(&words)).unwrap();
                    files.insert(rel.clone(), words);
                    format!("create {rel}")
                }
                2 => {
                    let rel = pick(&mut rng, &keys);
                    let w = word();
                    use std::io::Write;
                    fs::OpenOptions::new().append(true).open(ws.join(&rel)).unwrap().write_all(text(std::slice::from_ref(&w)).as_bytes()).unwrap();
                    files.get_mut(&rel).unwrap().push(w);
                    format!("append {rel}")
                }
                // Same size, same mtime: only the content tells, and on Unix the change time the rewrite moved.
                3 => {
                    let rel = pick(&mut rng, &keys);
                    let p = ws.join(&rel);
                    let mtime = fs::metadata(&p).unwrap().modified().unwrap();
                    let words: Vec<String> = files[&rel].iter().map(|_| word()).collect();
                    fs::write(&p, text(&words)).unwrap();
                    fs::File::options().write(true).open(&p).unwrap().set_modified(mtime).unwrap();
                    gone.extend(files.insert(rel.clone(), words).unwrap());
                    format!("same-size rewrite {rel}")
                }
                4 => {
                    let rel = pick(&mut rng, &keys);
                    let to = format!("{}/r{step}.md", pick(&mut rng, &folders));
                    if ws.join(&to).exists() {
                        continue;
                    }
                    fs::rename(ws.join(&rel), ws.join(&to)).unwrap();
                    let words = files.remove(&rel).unwrap();
                    files.insert(to.clone(), words);
                    format!("rename {rel} -> {to}")
                }
                5 => {
                    let rel = pick(&mut rng, &keys);
                    fs::remove_file(ws.join(&rel)).unwrap();
                    gone.extend(files.remove(&rel).unwrap());
                    format!("delete {rel}")
                }
                6 | 7 => {
                    // A whole folder renamed or deleted (never `memory/` itself).
                    let subs: Vec<String> = folders.iter().filter(|f| *f != "memory").cloned().collect();
                    if subs.is_empty() {
                        continue;
                    }
                    let dir = pick(&mut rng, &subs);
                    let inside: Vec<String> = files.keys().filter(|k| k.starts_with(&format!("{dir}/"))).cloned().collect();
                    if op == 6 {
                        let to = format!("memory/moved{step}");
                        fs::rename(ws.join(&dir), ws.join(&to)).unwrap();
                        for k in inside {
                            let words = files.remove(&k).unwrap();
                            files.insert(format!("{to}{}", &k[dir.len()..]), words);
                        }
                        format!("rename folder {dir} -> {to}")
                    } else {
                        fs::remove_dir_all(ws.join(&dir)).unwrap();
                        for k in inside {
                            gone.extend(files.remove(&k).unwrap());
                        }
                        format!("delete folder {dir}")
                    }
                }
                _ => {
                    let words = vec![word()];
                    fs::write(ws.join("MEMORY.md"), text(&words)).unwrap();
                    if let Some(old) = files.insert("MEMORY.md".into(), words) {
                        gone.extend(old);
                    }
                    "rewrite MEMORY.md".to_string()
                }
            };
            for (rel, words) in &files {
                for w in words {
                    let hits = paths(&e, w).await;
                    assert_eq!(hits, vec![rel.clone()], "seed {seed:#x} step {step} ({what}): {w} is in {rel}");
                }
            }
            for w in &gone {
                let hits = paths(&e, w).await;
                assert!(hits.is_empty(), "seed {seed:#x} step {step} ({what}): {w} is in no file, found in {hits:?}");
            }
        }
    }
}

/// A chunk cut from the middle of a section keeps the section's headings: a question that names the section and
/// the fact finds the chunk holding the fact, not the section's first chunk (which alone holds the heading line).
#[tokio::test]
async fn a_chunk_deep_in_a_section_answers_for_its_heading() {
    let env = Env::new();
    let mut log = String::from("# Lisbon trip\n\n");
    for i in 0..40 {
        log.push_str(&format!("- day {i}: walked the old town, coffee and pastries, long talks about the week\n"));
    }
    log.push_str("- booked the ferry to Cacilhas for Sunday morning\n");
    env.write("memory/2026-05-02.md", &log);
    env.write("memory/2026-04-01.md", "# Porto\n\n- the ferry across the Douro was closed\n");
    let e = env.open_keyword_only().await;
    let r = e.search(&SearchRequest::new("which ferry did we book on the Lisbon trip?")).await.unwrap();
    let hit = &r.results[0];
    assert_eq!(hit.path, "memory/2026-05-02.md", "{:?}", r.results);
    assert!(hit.start_line > 1 && hit.end_line == 43, "the chunk with the ferry line, not the first: {hit:?}");
    assert!(hit.snippet.contains("booked the ferry to Cacilhas"), "{:?}", hit.snippet);
}

/// An agent asking for five results reads the first five of what one asking for ten reads: the same hits in the
/// same order with the same snippets (the ranking reads at least ten candidates' worth, and snippets weigh a
/// query's words over the best ten, whatever `maxResults` is).
#[tokio::test]
async fn fewer_results_are_the_first_of_more() {
    let env = Env::new();
    // Chat-like daily logs over one small vocabulary, so that every query has many partial matches.
    let words = [
        "garden", "tomato", "camping", "lake", "pottery", "class", "running", "shoes", "kids", "museum", "painting", "sunset", "dinner", "friends",
        "trip", "beach", "book", "music", "violin", "weekend",
    ];
    let mut seed: u64 = 7;
    let mut next = |n: usize| {
        seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (seed >> 33) as usize % n
    };
    for day in 1..=24 {
        let mut text = format!("# 2026-10-{day:02}: a conversation\n\n");
        for turn in 0..14 {
            let who = if turn % 2 == 0 { "Ana" } else { "Ben" };
            let line: Vec<&str> = (0..12).map(|_| words[next(words.len())]).collect();
            text.push_str(&format!("{who}: we talked about the {} and then the {}.\n", line[..6].join(" "), line[6..].join(" ")));
        }
        env.write(&format!("memory/2026-10-{day:02}.md"), &text);
    }
    let engine = env.open_keyword_only().await;
    engine.sync(SyncOptions::default()).await.unwrap();
    let search = |q: &str, k: usize| {
        let mut req = SearchRequest::new(q);
        req.max_results = Some(k);
        req.min_score = Some(0.0);
        let engine = &engine;
        async move { engine.search(&req).await.unwrap().results.into_iter().map(|r| (r.path, r.start_line, r.end_line, r.snippet)).collect::<Vec<_>>() }
    };
    for q in ["What did Ana say about the garden tomato?", "camping at the lake with the kids", "pottery class on the weekend", "violin music"] {
        let ten = search(q, 10).await;
        assert_eq!(ten.len(), 10, "{q}");
        for k in [1, 3, 5, 7] {
            assert_eq!(search(q, k).await, ten[..k], "{q}: maxResults {k}");
        }
    }
}

/// A generated agent workload: short facts about many people and things, some in a daily log of facts, some
/// alone in a note, some added to a long conversation log; each asked back by who and what. The note that
/// holds the fact must come first, with the fact in its snippet. BM25 alone put a daily log holding the
/// question's words in different sentences (other people's keys) first in about a quarter of the questions;
/// the head's preference for a sentence holding the question together reads the right fact first.
#[tokio::test]
async fn a_fact_asked_by_who_and_what_is_read_first_among_many_alike() {
    const NAMES: &[&str] = &["Priya", "Tomás", "Yuki", "Olu", "Marta", "Chen Wei", "Søren", "Aisha"];
    const THINGS: &[&str] =
        &["the spare key", "the Wi-Fi password", "the boiler service", "the passport renewal", "the storage unit", "the car insurance"];
    const PLACES: &[&str] =
        &["under the blue flowerpot", "in the kitchen drawer", "at Harbour Street 12", "with the neighbour at number 7", "in the glovebox"];
    let env = Env::new();
    let memory = env.ws.path().join("memory");
    fs::create_dir_all(&memory).unwrap();
    // A conversation the facts are sometimes added to: long lines about other things.
    let talk: String =
        (0..30).map(|i| format!("Sam: On day {i} we walked the dog, cooked dinner and talked about the garden and the weather.\n")).collect();
    for d in 1..=4 {
        fs::write(memory.join(format!("2026-11-0{d}.md")), format!("# 2026-11-0{d}\n\n{talk}")).unwrap();
    }
    let mut seed = 7u64;
    let mut next = |n: usize| {
        seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        ((seed >> 33) as usize) % n
    };
    let mut log = String::from("# 2026-12-04\n\n");
    let mut facts = Vec::new();
    // Every second (person, thing) pair: 24 facts, each pair once.
    let pairs: Vec<(&str, &str)> = NAMES.iter().flat_map(|w| THINGS.iter().map(move |t| (*w, *t))).step_by(2).collect();
    for (k, (who, what)) in pairs.into_iter().enumerate() {
        let fact = format!("{who} says {what} is {} (ref {}).", PLACES[next(PLACES.len())], 100 + k);
        let path = match next(3) {
            0 => {
                log.push_str(&format!("- {fact}\n"));
                "memory/2026-12-04.md".to_string()
            }
            1 => {
                fs::write(memory.join(format!("note-{k}.md")), format!("# Note {k}\n\n{fact}\n")).unwrap();
                format!("memory/note-{k}.md")
            }
            _ => {
                let day = 1 + next(4);
                let p = memory.join(format!("2026-11-0{day}.md"));
                let mut text = fs::read_to_string(&p).unwrap();
                text.push_str(&format!("Sam: {fact}\n"));
                fs::write(&p, text).unwrap();
                format!("memory/2026-11-0{day}.md")
            }
        };
        facts.push((who, what, fact, path));
    }
    fs::write(memory.join("2026-12-04.md"), &log).unwrap();
    let e = env.open_keyword_only().await;
    e.sync(SyncOptions::default()).await.unwrap();
    let mut missed = Vec::new();
    for (who, what, fact, path) in &facts {
        let q = format!("what did {who} say about {what}?");
        let r = e.search(&SearchRequest::new(&q)).await.unwrap();
        let first = r.results.first();
        if !first.is_some_and(|h| h.path == *path && h.snippet.contains(fact.as_str())) {
            missed.push(format!("{q} -> {:?} (the fact is in {path})", first.map(|h| &h.path)));
        }
    }
    assert!(missed.len() * 10 <= facts.len(), "{} of {} facts not read first:\n{}", missed.len(), facts.len(), missed.join("\n"));
}

/// A provider that learns its width from its first answer (`openai-compatible` with a model not in the catalogue).
struct LearningEmbedder {
    inner: BagOfWordsEmbedder,
    learned: std::sync::atomic::AtomicBool,
}

#[async_trait]
impl EmbeddingProvider for LearningEmbedder {
    fn id(&self) -> &str {
        self.inner.id()
    }
    fn model(&self) -> &str {
        self.inner.model()
    }
    fn dimensions(&self) -> Option<usize> {
        self.learned.load(Ordering::SeqCst).then_some(64)
    }
    fn fingerprint(&self) -> String {
        self.inner.fingerprint()
    }
    async fn embed(&self, texts: &[String], purpose: EmbeddingPurpose) -> Result<Vec<Vec<f32>>, EmbeddingError> {
        self.learned.store(true, Ordering::SeqCst);
        self.inner.embed(texts, purpose).await
    }
}

/// An index built by a provider that learns its width is not rebuilt once the width is known, nor at the next
/// start (it was, at every start of `memory serve`: "dimensions" changed).
#[tokio::test]
async fn a_provider_that_learns_its_width_does_not_rebuild_the_index() {
    let env = sample_env();
    for start in 0..2 {
        let embedder = Arc::new(LearningEmbedder { inner: BagOfWordsEmbedder::new(64), learned: false.into() });
        let e = env.open(Config::default(), Some(embedder)).await;
        for _ in 0..2 {
            let r = e.sync(SyncOptions::default()).await.unwrap();
            assert!(!r.rebuilt, "start {start}: {r:?}");
        }
        assert!(e.status().await.unwrap().warnings.iter().all(|w| !w.contains("rebuil")), "start {start}");
        assert_eq!(e.search(&SearchRequest::new("oat milk")).await.unwrap().mode.as_deref(), Some("hybrid"));
    }
}

/// What an index holds, read from its SQLite file: the file records and chunks (without rowids, which depend on the
/// order of writes), each chunk's vector, and the keyword index's totals record (the document count and column
/// lengths BM25 reads), with the keyword score of each chunk for a few queries.
/// Rows, vectors by chunk id, the FTS totals record, keyword scores by query and chunk.
type IndexContents = (Vec<String>, Vec<(String, Vec<u8>)>, Vec<u8>, Vec<(String, String)>);

fn index_contents(index: &str) -> IndexContents {
    let c = rusqlite::Connection::open(index).unwrap();
    let rows = |sql: &str| -> Vec<String> {
        let mut st = c.prepare(sql).unwrap();
        let mut out: Vec<String> = st.query_map([], |r| r.get::<_, String>(0)).unwrap().map(Result::unwrap).collect();
        out.sort();
        out
    };
    let mut chunks = rows("SELECT id || '|' || start_line || '|' || end_line || '|' || hash || '|' || terms || '|' || heading FROM chunks");
    chunks.extend(rows("SELECT source || '|' || path || '|' || size FROM files"));
    let mut vectors: Vec<(String, Vec<u8>)> = c
        .prepare("SELECT c.id, v.embedding FROM chunks c JOIN vec_f32 v ON v.rowid = c.rowid")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    vectors.sort();
    let totals: Vec<u8> = c.query_row("SELECT block FROM chunks_fts_data WHERE id = 1", [], |r| r.get(0)).unwrap();
    let mut scores = Vec::new();
    for q in ["gateway", "friday", "sqlite"] {
        let mut st =
            c.prepare("SELECT c.id, bm25(chunks_fts) FROM chunks_fts JOIN chunks c ON c.rowid = chunks_fts.rowid WHERE chunks_fts MATCH ?1").unwrap();
        let got: Vec<(String, f64)> = st.query_map([q], |r| Ok((r.get(0)?, r.get(1)?))).unwrap().map(Result::unwrap).collect();
        scores.extend(got.into_iter().map(|(id, s)| (format!("{q}:{id}"), format!("{s:.12}"))));
    }
    scores.sort();
    (chunks, vectors, totals, scores)
}

/// The same files and settings give the same index, whichever way it was built: by a first search (words first,
/// vectors after: every file written twice) or by `memory index` at once. Before the keyword index read its terms
/// from the chunks, the first way left FTS5 totals of twice the chunks, and keyword scores differed.
#[tokio::test]
async fn an_index_built_by_words_then_vectors_is_the_index_built_at_once() {
    let model = Arc::new(BagOfWordsEmbedder::new(64));
    let by_search = sample_env();
    let embedder = Arc::new(DelayedEmbedder::new(model.clone(), std::time::Duration::ZERO));
    embedder.down.store(true, Ordering::SeqCst);
    let e = by_search.open(Config::default(), Some(embedder.clone())).await;
    let r = e.sync(SyncOptions::default()).await.unwrap();
    assert_eq!(r.files_pending, 4, "the first pass indexes by words: {r:?}");
    embedder.down.store(false, Ordering::SeqCst);
    let r = e.sync(SyncOptions::default()).await.unwrap();
    assert_eq!(r.files_pending, 0, "{r:?}");
    // And an edit written and taken back, as a user does.
    by_search.write("MEMORY.md", "# Memory\n\nA draft line about nothing in particular.\n");
    e.sync(SyncOptions::default()).await.unwrap();
    sample(&by_search);
    e.sync(SyncOptions::default()).await.unwrap();
    let a = e.status().await.unwrap().index_path.unwrap();
    e.close().await.unwrap();

    let at_once = sample_env();
    let e = at_once.open(Config::default(), Some(model)).await;
    e.sync(SyncOptions::default()).await.unwrap();
    let b = e.status().await.unwrap().index_path.unwrap();
    e.close().await.unwrap();

    let (a, b) = (index_contents(&a), index_contents(&b));
    assert_eq!(a.0, b.0, "chunks and file records");
    assert_eq!(a.1.len(), b.1.len(), "vectors");
    assert!(a.1 == b.1, "the same vector for every chunk");
    assert_eq!(a.2, b.2, "the keyword index's totals");
    assert_eq!(a.3, b.3, "keyword scores");
    assert!(!a.3.is_empty());
}

/// Chunk rowids by chunk id: a row rewritten gets a new rowid, a row left alone keeps its own.
fn rowids(index: &str) -> HashMap<String, i64> {
    let c = rusqlite::Connection::open(index).unwrap();
    let mut st = c.prepare("SELECT id, rowid FROM chunks").unwrap();
    st.query_map([], |r| Ok((r.get(0)?, r.get(1)?))).unwrap().map(Result::unwrap).collect()
}

/// A long daily log that is appended to, and has a heading renamed, keeps every row an edit did not change (an
/// append rewrote the whole file's chunks, keyword and vector rows, so each append cost the log's length), and
/// still ends as the index built at once from the same file (terms, headings, vectors, keyword totals).
#[tokio::test]
async fn an_edit_to_a_long_note_rewrites_only_the_chunks_it_changed() {
    let model = Arc::new(BagOfWordsEmbedder::new(64));
    let log = |entries: usize, heading: &str| {
        let mut s = format!("# 2026-11-30\n\n## {heading}\n\n");
        for i in 0..entries {
            s.push_str(&format!("- entry {i}: the gateway moved to rack {i} on friday, said sqlite\n"));
            if i == entries / 2 {
                s.push_str("\n## Afternoon\n\n");
            }
        }
        s
    };
    let edited = sample_env();
    edited.write("memory/2026-11-30.md", &log(600, "Morning"));
    let e = edited.open(Config::default(), Some(model.clone())).await;
    e.sync(SyncOptions::default()).await.unwrap();
    let index = e.status().await.unwrap().index_path.unwrap();
    let before = rowids(&index);
    assert!(before.len() > 20, "a log of many chunks: {}", before.len());

    edited.write("memory/2026-11-30.md", &log(601, "Morning"));
    e.sync(SyncOptions::default()).await.unwrap();
    let after = rowids(&index);
    let kept = after.iter().filter(|(id, rowid)| before.get(*id) == Some(rowid)).count();
    assert!(kept >= after.len() - 2, "an append rewrote {} of {} chunks", after.len() - kept, after.len());

    // A renamed heading changes the heading words of chunks whose own text did not change.
    edited.write("memory/2026-11-30.md", &log(601, "Standup"));
    e.sync(SyncOptions::default()).await.unwrap();
    e.close().await.unwrap();

    let at_once = sample_env();
    at_once.write("memory/2026-11-30.md", &log(601, "Standup"));
    let e = at_once.open(Config::default(), Some(model)).await;
    e.sync(SyncOptions::default()).await.unwrap();
    let fresh = e.status().await.unwrap().index_path.unwrap();
    e.close().await.unwrap();
    let (a, b) = (index_contents(&index), index_contents(&fresh));
    assert_eq!(a.0, b.0, "chunks and file records");
    assert!(a.1 == b.1, "the same vector for every chunk");
    assert_eq!(a.2, b.2, "the keyword index's totals");
    assert_eq!(a.3, b.3, "keyword scores");
}

/// `status --deep` checks the keyword index against the chunks: a mismatch is damage, set aside and rebuilt.
#[tokio::test]
async fn a_keyword_index_out_of_step_with_the_chunks_is_rebuilt_by_a_deep_check() {
    let (env, e) = indexed_sample().await;
    assert_eq!(e.verify().await.unwrap(), None, "a sound index has nothing to repair");
    let index = e.status().await.unwrap().index_path.unwrap();
    {
        // The terms of one chunk changed behind the keyword index's back: FTS5 still holds the old ones.
        let c = rusqlite::Connection::open(&index).unwrap();
        let n = c.execute("UPDATE chunks SET terms = 'zebra' WHERE path = 'MEMORY.md'", []).unwrap();
        assert!(n > 0);
    }
    let repaired = e.verify().await.unwrap();
    assert!(repaired.as_deref().is_some_and(|r| r.contains("keyword index does not match")), "{repaired:?}");
    let again = e.verify().await.unwrap();
    assert_eq!(again, None, "in step after the rebuild");
    assert_eq!(top(&e, "gateway").await.as_deref(), Some("MEMORY.md"));
    assert_eq!(top(&e, "zebra").await, None);
    drop(env);
}
