//! The engine on a local folder: fixtures rank as expected, add/change/delete, restart without re-embedding,
//! FTS freshness, maintenance, ANN index, rebuild by generation swap, errors.

use std::sync::Arc;
use std::time::Duration;

use crate::common::*;
use memory_core::store::{ChunkRecord, ChunkStore, FileRecord, IndexStorage, KeywordQuery, Scope, SyncBatch};
use memory_core::{ErrorKind, MemoryBackend, Source, SyncOptions};
use memory_lancedb::LanceDbOptions;

const LIMIT: Duration = Duration::from_secs(150);

async fn bounded<F: std::future::Future>(f: F) -> F::Output {
    tokio::time::timeout(LIMIT, f).await.expect("test took too long")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fixtures_give_the_expected_top_results() {
    bounded(async {
        let f = LocalFixture::new();
        let (b, _s) = f.open().await;
        let report = b.sync(SyncOptions::default()).await.unwrap();
        assert_eq!(report.files_added, 6, "{report:?}");
        assert!(report.chunks_embedded > 0);

        let cases = [
            ("postgres migration downtime", "memory/2026-01-10.md"),
            ("hiking trip in the Dolomites", "memory/2026-02-03.md"),
            ("when do the tomatoes need watering", "memory/projects/garden.md"),
            ("kubernetes ingress annotations", "memory/2026-03-15.md"),
            ("what coffee does the user like", "MEMORY.md"),
            ("向量数据库", "memory/notes-zh.md"),
            ("garden.md", "memory/projects/garden.md"),
        ];
        for (q, want) in cases {
            let r = search(&b, q).await;
            assert_eq!(r.results.first().map(|x| x.path.as_str()), Some(want), "query {q:?}: {:?}", paths(&r));
            assert_eq!(r.mode.as_deref(), Some("hybrid"), "{q}");
        }
        // Hybrid scores carry both parts for a keyword+vector hit.
        let r = search(&b, "postgres migration downtime").await;
        assert!(r.results[0].text_score.unwrap_or(0.0) > 0.0 && r.results[0].vector_score.unwrap_or(0.0) > 0.0, "{:?}", r.results[0]);
        // A word that appears nowhere finds nothing by keyword.
        let st = b.status().await.unwrap();
        assert_eq!(st.files, 6);
        assert!(st.chunks >= 6);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn add_change_and_delete_notes() {
    bounded(async {
        let f = LocalFixture::new();
        let (b, _s) = f.open().await;
        b.sync(SyncOptions::default()).await.unwrap();

        write(f.ws.path(), "memory/2026-04-01.md", "# Sailing\n\nLearnt to tack a catamaran on Lake Garda.\n");
        let r = b.sync(SyncOptions::default()).await.unwrap();
        assert_eq!((r.files_added, r.files_changed, r.files_removed), (1, 0, 0), "{r:?}");
        assert_eq!(top_path(&b, "catamaran").await.as_deref(), Some("memory/2026-04-01.md"));

        // Change: the new text is found, the old text is gone.
        std::thread::sleep(Duration::from_millis(20));
        write(f.ws.path(), "memory/2026-04-01.md", "# Sailing\n\nLearnt to windsurf on Lake Garda instead.\n");
        let r = b.sync(SyncOptions::default()).await.unwrap();
        assert_eq!(r.files_changed, 1, "{r:?}");
        assert_eq!(top_path(&b, "windsurf").await.as_deref(), Some("memory/2026-04-01.md"));
        let kw = search(&b, "catamaran").await;
        assert!(kw.results.iter().all(|x| x.text_score.unwrap_or(0.0) == 0.0), "stale chunk still matches: {:?}", kw.results);

        // Delete.
        std::fs::remove_file(f.ws.path().join("memory/2026-04-01.md")).unwrap();
        let r = b.sync(SyncOptions::default()).await.unwrap();
        assert_eq!(r.files_removed, 1, "{r:?}");
        let after = search(&b, "windsurf").await;
        assert!(!paths(&after).contains(&"memory/2026-04-01.md".to_string()), "{:?}", paths(&after));
        assert_eq!(b.status().await.unwrap().files, 6);

        // A touch (same content, new mtime) changes nothing searchable and keeps the vectors.
        let before = f.emb.texts();
        let p = f.ws.path().join("memory/projects/garden.md");
        let text = std::fs::read_to_string(&p).unwrap();
        std::thread::sleep(Duration::from_millis(20));
        std::fs::write(&p, text).unwrap();
        let r = b.sync(SyncOptions::default()).await.unwrap();
        assert_eq!((r.files_changed, r.chunks_embedded), (0, 0), "{r:?}");
        assert_eq!(f.emb.texts(), before);
        let r = search(&b, "tomatoes watering").await;
        assert_eq!(r.results[0].path, "memory/projects/garden.md");
        assert!(r.results[0].vector_score.unwrap_or(0.0) > 0.0, "vector lost on touch: {:?}", r.results[0]);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restart_reopens_without_re_embedding() {
    bounded(async {
        let f = LocalFixture::new();
        {
            let (b, _s) = f.open().await;
            b.sync(SyncOptions::default()).await.unwrap();
            b.close().await.unwrap();
        }
        let embedded = f.emb.texts();
        assert!(embedded > 0);
        let calls = f.emb.calls();

        let (b, _s) = f.open().await;
        let st = b.status().await.unwrap();
        assert_eq!(st.files, 6);
        assert!(st.warnings.is_empty(), "{:?}", st.warnings);
        let r = b.sync(SyncOptions::default()).await.unwrap();
        assert!(!r.rebuilt);
        assert_eq!((r.files_unchanged, r.chunks_embedded), (6, 0), "{r:?}");
        assert_eq!(f.emb.texts(), embedded, "documents re-embedded after restart");
        assert_eq!(top_path(&b, "kubernetes upgrade").await.as_deref(), Some("memory/2026-03-15.md"));
        // Only the query was embedded.
        assert_eq!(f.emb.calls(), calls + 1);

        // A forced rebuild reuses the cache: no document is embedded again.
        let r = b.sync(SyncOptions { force: true, ..SyncOptions::default() }).await.unwrap();
        assert!(r.rebuilt);
        assert_eq!(r.chunks_embedded, 0, "{r:?}");
        assert_eq!(f.emb.texts(), embedded + 1);
        assert_eq!(top_path(&b, "kubernetes upgrade").await.as_deref(), Some("memory/2026-03-15.md"));
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rows_added_after_the_fts_index_are_found() {
    bounded(async {
        let f = LocalFixture::new();
        // Keyword-only, and no optimize: new rows stay outside the FTS index.
        let opts = LanceDbOptions { optimize_after_rows: usize::MAX, optimize_after_commits: usize::MAX, ..test_options() };
        let (b, s) = f.open_with(config(""), None, opts).await;
        b.sync(SyncOptions::default()).await.unwrap();
        let store = s.open_live_store().await.unwrap();
        let idx = store.index_names().await.unwrap();
        assert!(idx.iter().any(|(c, t)| c == "terms" && t == "FTS"), "{idx:?}");

        write(f.ws.path(), "memory/2026-05-05.md", "# Chess\n\nStudied the Najdorf variation of the Sicilian defence.\n");
        b.sync(SyncOptions::default()).await.unwrap();
        let r = search(&b, "najdorf sicilian").await;
        assert_eq!(r.results.first().map(|x| x.path.as_str()), Some("memory/2026-05-05.md"), "{:?}", paths(&r));
        assert_eq!(r.mode.as_deref(), Some("keyword"));
        // Straight from the store as well, with a source filter.
        let k = store.keyword_search(&KeywordQuery { terms: vec!["najdorf".into()] }, 5, &Scope::sources(&[Source::Memory])).await.unwrap();
        assert_eq!(k.len(), 1);
        assert!(k[0].keyword_score.unwrap() > 0.0);
        assert!(store
            .keyword_search(&KeywordQuery { terms: vec!["najdorf".into()] }, 5, &Scope::sources(&[Source::Sessions]))
            .await
            .unwrap()
            .is_empty());
        // Keyword-only store: vector search is unavailable, not an error of another kind.
        let e = store.vector_search(&[0.0; 4], 5, &Scope::default()).await.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Unavailable);
        // After optimize the row is in the index and still found.
        store.optimize_now().await.unwrap();
        assert_eq!(top_path(&b, "najdorf").await.as_deref(), Some("memory/2026-05-05.md"));
    })
    .await;
}

fn chunk(path: &str, i: usize, v: Vec<f32>) -> ChunkRecord {
    let text = format!("note {i} about topic{} and item{i}", i % 7);
    ChunkRecord {
        id: format!("{path}#{i}"),
        source: Source::Memory,
        path: path.into(),
        start_line: i + 1,
        end_line: i + 1,
        hash: memory_core::sha256_hex(text.as_bytes()),
        terms: memory_core::analysis::document_terms_joined(&text),
        heading_terms: String::new(),
        text,
        importance: None,
        date: None,
        embedding: Some(v),
    }
}

fn seeded_vector(seed: u64, dims: usize) -> Vec<f32> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut v: Vec<f32> = (0..dims)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            ((x >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0) as f32
        })
        .collect();
    memory_core::embedding::sanitize_and_normalize(&mut v);
    v
}

/// File `memory/f{f}.md` with `n` chunks numbered from `f * 100`, each with a seeded vector, in one commit.
async fn write_seeded_file(store: &memory_lancedb::LanceStore, f: usize, n: usize, dims: usize) {
    let path = format!("memory/f{f}.md");
    let chunks: Vec<ChunkRecord> = (0..n).map(|i| chunk(&path, f * 100 + i, seeded_vector((f * 100 + i) as u64, dims))).collect();
    let file = FileRecord { source: Source::Memory, path, hash: format!("h{f}"), size: 1, mtime_ms: 1 };
    store.apply(SyncBatch { upserts: vec![(file, chunks)], ..Default::default() }).await.unwrap();
}

/// Table `m` in `dir`, opened with `opts`: (its storage, its live store).
async fn table_m(dir: &std::path::Path, opts: LanceDbOptions) -> (memory_lancedb::LanceDbStorage, Arc<memory_lancedb::LanceStore>) {
    let storage = memory_lancedb::LanceDbStorage::connect(dir.to_str().unwrap(), &Default::default(), "m", opts).await.unwrap();
    let store = storage.open_live_store().await.unwrap();
    (storage, store)
}

/// Each probe's seeded vector finds its own chunk (as [`write_seeded_file`] numbers them) first, as itself.
async fn assert_probes_find_themselves(store: &memory_lancedb::LanceStore, probes: &[u64], dims: usize) {
    for &probe in probes {
        let hits = store.vector_search(&seeded_vector(probe, dims), 3, &Scope::default()).await.unwrap();
        assert_eq!(hits[0].chunk_id, format!("memory/f{}.md#{probe}", probe / 100), "probe {probe}");
        assert!((hits[0].vector_score.unwrap() - 1.0).abs() < 1e-3, "probe {probe}: {:?}", hits[0].vector_score);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_vector_index_is_retrained_as_the_table_grows() {
    bounded(async {
        let db = tempfile::tempdir().unwrap();
        let opts = LanceDbOptions { ann_min_rows: 300, ann_partition_size: 100, ..test_options() };
        let (storage, store) = table_m(db.path(), opts).await;
        let mut builds = Vec::new();
        for f in 0..8usize {
            write_seeded_file(&store, f, 100, 16).await;
            builds.push(store.ann_build().await.unwrap());
        }
        // Exact search below 300 vectors; trained at 300 (3 partitions); kept until the vectors grew by half,
        // then retrained at 500 (5 partitions) and 800 (8): index catch-up alone would have kept 3 ever-larger
        // partitions.
        let (t3, t5, t8) = (Some((300, 3)), Some((500, 5)), Some((800, 8)));
        assert_eq!(builds, vec![None, None, t3, t3, t5, t5, t5, t8]);
        // A new store on the same table reads the record, and the retrained index answers.
        let again = storage.open_live_store().await.unwrap();
        assert_eq!(again.ann_build().await.unwrap(), t8);
        assert_probes_find_themselves(&again, &[5, 450, 799], 16).await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vector_index_delta_segments_are_merged() {
    bounded(async {
        let db = tempfile::tempdir().unwrap();
        // Maintenance after every commit: each adds a delta segment for its new rows.
        let opts = LanceDbOptions { ann_min_rows: 300, ann_partition_size: 100, optimize_after_commits: 1, ..test_options() };
        let (_storage, store) = table_m(db.path(), opts).await;
        let mut segments = Vec::new();
        for f in 0..9usize {
            // 3 files of 100 chunks train the index; then 10-chunk files, too few to retrain it.
            write_seeded_file(&store, f, if f < 3 { 100 } else { 10 }, 16).await;
            segments.push(store.vector_index_segments().await.unwrap());
        }
        assert_eq!(store.ann_build().await.unwrap(), Some((300, 3)), "no retraining in this test");
        // The engine's status shows the index (under `extra`).
        let details = store.status_details().await.unwrap();
        let v = &details["vectorIndex"];
        assert_eq!((v["kind"].as_str(), v["trainedOnVectors"].as_u64(), v["partitions"].as_u64()), (Some("IvfFlat"), Some(300), Some(3)));
        assert_eq!(v["nprobes"].as_u64(), Some(8));
        assert!(v["segments"].as_u64().is_some_and(|s| (1..=4).contains(&s)), "{v}");
        let most = segments.iter().flatten().copied().max().unwrap();
        assert!(most <= 4, "segments after each write: {segments:?}");
        assert!(segments.iter().flatten().any(|s| *s > 1), "no delta segment was ever added: {segments:?}");
        assert_probes_find_themselves(&store, &[5, 250, 804], 16).await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_index_from_an_earlier_version_is_retrained_on_the_next_write() {
    bounded(async {
        let db = tempfile::tempdir().unwrap();
        // An earlier version's table: an IVF-HNSW-SQ index and no training record.
        let old = LanceDbOptions { ann_min_rows: usize::MAX, ..test_options() };
        let (storage, store) = table_m(db.path(), old).await;
        for f in 0..3 {
            write_seeded_file(&store, f, 100, 16).await;
        }
        let table = storage.connection().open_table("m_g1").execute().await.unwrap();
        let hnsw = LanceDbOptions { ann_index: memory_lancedb::AnnIndexKind::IvfHnswSq, ann_partition_size: 100, ..test_options() };
        memory_lancedb::create_ann_index(&table, 300, &hnsw).await.unwrap();
        assert_eq!(store.ann_build().await.unwrap(), None);
        drop((store, storage));

        let now = LanceDbOptions { ann_min_rows: 300, ann_partition_size: 100, ..test_options() };
        let (_storage, store) = table_m(db.path(), now).await;
        write_seeded_file(&store, 3, 100, 16).await;
        assert_eq!(store.ann_build().await.unwrap(), Some((400, 4)));
        let idx = store.index_names().await.unwrap();
        assert!(idx.iter().any(|(c, t)| c == "vector" && t == "IvfFlat"), "{idx:?}");
        let hits = store.vector_search(&seeded_vector(123, 16), 3, &Scope::default()).await.unwrap();
        assert_eq!(hits[0].chunk_id, "memory/f1.md#123");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn maintenance_prunes_versions_and_ann_index_keeps_answers() {
    bounded(async {
        let db = tempfile::tempdir().unwrap();
        let opts = LanceDbOptions { ann_min_rows: 600, ann_partition_size: 200, optimize_after_commits: 4, ..test_options() };
        let (_storage, store) = table_m(db.path(), opts).await;
        // 8 files x 100 chunks, one commit per file.
        for f in 0..8usize {
            write_seeded_file(&store, f, 100, 32).await;
        }
        assert_eq!(store.counts().await.unwrap(), (8, 800));
        let idx = store.index_names().await.unwrap();
        assert!(idx.iter().any(|(c, t)| c == "vector" && t.contains("Ivf")), "no ANN index: {idx:?}");
        assert_eq!(store.ann_build().await.unwrap(), Some((600, 3)), "trained at 600 vectors, 3 partitions of ~200");
        // Pruned: far fewer versions than commits (8 data commits + index builds + optimizes).
        let versions = store.data_versions().await.unwrap();
        assert!(versions <= 4, "{versions} versions kept");

        // ANN answers: an indexed vector finds itself first.
        assert_probes_find_themselves(&store, &[3, 250, 777], 32).await;
        // Rows written after the ANN index are searched too (exact over the unindexed part).
        let extra = chunk("memory/new.md", 5000, seeded_vector(5000, 32));
        let file = FileRecord { source: Source::Memory, path: "memory/new.md".into(), hash: "n".into(), size: 1, mtime_ms: 1 };
        store.apply(SyncBatch { upserts: vec![(file, vec![extra])], ..Default::default() }).await.unwrap();
        let hits = store.vector_search(&seeded_vector(5000, 32), 3, &Scope::default()).await.unwrap();
        assert_eq!(hits[0].chunk_id, "memory/new.md#5000");

        // Removing a file removes its chunks and record in one commit.
        store.apply(SyncBatch { removals: vec![(Source::Memory, "memory/f0.md".into())], ..Default::default() }).await.unwrap();
        assert_eq!(store.counts().await.unwrap(), (8, 801 - 100));
        let k = store.keyword_search(&KeywordQuery { terms: vec!["item3".into()] }, 5, &Scope::default()).await.unwrap();
        assert!(k.is_empty(), "{k:?}");
        let k = store.keyword_search(&KeywordQuery { terms: vec!["item103".into()] }, 5, &Scope::default()).await.unwrap();
        assert_eq!(k.len(), 1);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn identity_change_rebuilds_into_a_new_generation() {
    bounded(async {
        let f = LocalFixture::new();
        let (b, s) = f.open().await;
        b.sync(SyncOptions::default()).await.unwrap();
        drop(b);
        let tables_before = s.connection().table_names().execute().await.unwrap();
        assert!(tables_before.contains(&"memory_test_g1".to_string()), "{tables_before:?}");

        // Smaller chunks: the identity differs, the index is rebuilt beside the old one and swapped in.
        let (b, s) = f.open_with(config(", chunking: { tokens: 32, overlap: 4 }"), Some(f.emb.clone()), test_options()).await;
        let r = b.sync(SyncOptions::default()).await.unwrap();
        assert!(r.rebuilt, "{r:?}");
        let tables = s.connection().table_names().execute().await.unwrap();
        assert!(tables.contains(&"memory_test_g2".to_string()) && !tables.iter().any(|t| t.starts_with("memory_test_g1")), "{tables:?}");
        assert_eq!(top_path(&b, "hiking Dolomites").await.as_deref(), Some("memory/2026-02-03.md"));

        // A leftover of an interrupted rebuild is discarded by the next one.
        let staging = s.open_staging().await.unwrap();
        staging
            .apply(SyncBatch {
                upserts: vec![(FileRecord { source: Source::Memory, path: "x.md".into(), hash: "h".into(), size: 1, mtime_ms: 1 }, vec![])],
                ..Default::default()
            })
            .await
            .unwrap();
        drop(staging);
        let _again = s.open_staging().await.unwrap();
        assert!(!s.connection().table_names().execute().await.unwrap().iter().any(|t| t.starts_with("memory_test_g3")));

        s.destroy().await.unwrap();
        assert!(s.connection().table_names().execute().await.unwrap().is_empty());
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_factory_opens_the_configured_folder() {
    bounded(async {
        let ws = tempfile::tempdir().unwrap();
        let state = tempfile::tempdir().unwrap();
        fixture_workspace(ws.path());
        let ctx = memory_core::registry::OpenContext::new(config(""), ws.path().to_path_buf(), state.path().to_path_buf(), "main");
        let mut reg = memory_core::registry::BackendRegistry::new();
        reg.register("lancedb", Arc::new(memory_lancedb::LanceDbFactory::default()));
        let b = reg.open(ctx.clone()).await.unwrap();
        assert_eq!(b.name(), "lancedb");
        assert_eq!(top_path(b.as_ref(), "kubernetes").await.as_deref(), Some("memory/2026-03-15.md"));
        // The default folder is the agent's and workspace's LanceDB home in the state folder.
        let home = ctx.space.engine_home("lancedb");
        assert!(home.starts_with(state.path().join("agents/main")), "{home:?}");
        assert!(home.join("memory_main.lance").exists(), "{home:?}");

        // A bad table name is a configuration error naming the key.
        let mut bad = (*ctx.config).clone();
        let lance = memory_lancedb::LanceDbConfig::from_config(&bad).unwrap();
        memory_lancedb::LanceDbConfig { table: Some("no/slashes".into()), ..lance }.write_to(&mut bad).unwrap();
        let e = memory_lancedb::LanceDbFactory::default()
            .open_indexed(memory_core::registry::OpenContext { config: Arc::new(bad), ..ctx.clone() })
            .await
            .err()
            .unwrap();
        assert_eq!(e.kind(), ErrorKind::InvalidInput);
        assert!(e.to_string().contains("memory.lancedb.table"), "{e}");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unreachable_object_storage_fails_fast_as_unavailable() {
    bounded(async {
        let port = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().port()
        }; // closed again: nothing listens there
        let opts: std::collections::BTreeMap<String, String> = [
            ("aws_access_key_id", "x"),
            ("aws_secret_access_key", "y"),
            ("aws_region", "us-east-1"),
            ("aws_endpoint", &format!("http://127.0.0.1:{port}")),
            ("allow_http", "true"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        let started = std::time::Instant::now();
        // Connecting may already list the bucket; either step must fail, as Unavailable, naming the URI.
        let e = match memory_lancedb::LanceDbStorage::connect("s3://nobucket/idx", &opts, "m", test_options()).await {
            Ok(s) => s.open_live().await.err().expect("opening on a closed port must fail"),
            Err(e) => e,
        };
        assert_eq!(e.kind(), ErrorKind::Unavailable, "{e}");
        assert!(e.to_string().contains("s3://nobucket/idx"), "{e}");
        assert!(started.elapsed() < Duration::from_secs(60), "took {:?}", started.elapsed());
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn local_writer_lock_is_exclusive_across_storages() {
    use memory_core::store::IndexStorage;
    bounded(async {
        let db = tempfile::tempdir().unwrap();
        let no_options = std::collections::BTreeMap::new();
        let connect = || memory_lancedb::LanceDbStorage::connect(db.path().to_str().unwrap(), &no_options, "memory_test", test_options());
        let (a, b) = (connect().await.unwrap(), connect().await.unwrap());
        let held = a.writer_lock(false).await.unwrap();
        assert!(held.is_some());
        let e = b.writer_lock(false).await.expect_err("both storages got the writer lock");
        assert_eq!(e.kind(), ErrorKind::Unavailable, "{e}");
        drop(held);
        assert!(b.writer_lock(true).await.unwrap().is_some());
        // The lock file is not a table.
        let s = connect().await.unwrap();
        assert!(s.connection().table_names().execute().await.unwrap().iter().all(|t| !t.contains("lock")));
    })
    .await;
}
