//! The engine on `s3://` against moto's S3 server on loopback (started and stopped by each test): the local
//! scenarios on object storage, and two engine instances ("hosts") writing and reading one table.

use std::sync::Arc;
use std::time::Duration;

use crate::common::*;
use memory_core::embedding::EmbeddingProvider;
use memory_core::indexed::IndexedBackend;
use memory_core::{MemoryBackend, SyncOptions};
use memory_lancedb::LanceDbStorage;

const LIMIT: Duration = Duration::from_secs(170);

async fn host(moto: &Moto, uri: &str, ws: &std::path::Path, emb: &Arc<CountingEmbedder>) -> IndexedBackend {
    let storage = LanceDbStorage::connect(uri, &moto.storage_options(), "memory_team", test_options()).await.unwrap();
    IndexedBackend::open("lancedb", config(""), ws.to_path_buf(), Arc::new(storage), Some(emb.clone() as Arc<dyn EmbeddingProvider>)).await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s3_index_search_change_and_restart() {
    let moto = Moto::with_bucket("mem");
    tokio::time::timeout(LIMIT, async {
        let ws = tempfile::tempdir().unwrap();
        fixture_workspace(ws.path());
        let emb = Arc::new(CountingEmbedder::default());
        let uri = "s3://mem/agents/main";
        {
            let b = host(&moto, uri, ws.path(), &emb).await;
            let r = b.sync(SyncOptions::default()).await.unwrap();
            assert_eq!(r.files_added, 6, "{r:?}");
            assert_eq!(top_path(&b, "postgres migration").await.as_deref(), Some("memory/2026-01-10.md"));
            write(ws.path(), "memory/2026-04-01.md", "# Sailing\n\nLearnt to tack a catamaran on Lake Garda.\n");
            std::fs::remove_file(ws.path().join("memory/projects/garden.md")).unwrap();
            let r = b.sync(SyncOptions::default()).await.unwrap();
            assert_eq!((r.files_added, r.files_removed), (1, 1), "{r:?}");
            assert_eq!(top_path(&b, "catamaran").await.as_deref(), Some("memory/2026-04-01.md"));
            assert!(!paths(&search(&b, "tomatoes watering").await).contains(&"memory/projects/garden.md".to_string()));
            b.close().await.unwrap();
        }
        let embedded = emb.texts();
        let b = host(&moto, uri, ws.path(), &emb).await;
        let r = b.sync(SyncOptions::default()).await.unwrap();
        assert_eq!((r.files_unchanged, r.chunks_embedded), (6, 0), "{r:?}");
        assert_eq!(emb.texts(), embedded);
        let st = b.status().await.unwrap();
        assert!(st.index_path.as_deref().unwrap_or("").starts_with("s3://mem/agents/main"), "{:?}", st.index_path);
        assert_eq!(st.files, 6);
    })
    .await
    .expect("s3 test took too long");
}

/// Two hosts, each with its own embedder, on one table, seeing the same fixture workspace (a shared checkout).
struct TwoHosts {
    ws: tempfile::TempDir,
    a: IndexedBackend,
    b: IndexedBackend,
    eb: Arc<CountingEmbedder>,
}

impl TwoHosts {
    async fn open(moto: &Moto, uri: &str) -> TwoHosts {
        let ws = tempfile::tempdir().unwrap();
        fixture_workspace(ws.path());
        let (ea, eb) = (Arc::new(CountingEmbedder::default()), Arc::new(CountingEmbedder::default()));
        let a = host(moto, uri, ws.path(), &ea).await;
        let b = host(moto, uri, ws.path(), &eb).await;
        TwoHosts { ws, a, b, eb }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s3_two_hosts_share_one_table() {
    let moto = Moto::with_bucket("team");
    tokio::time::timeout(LIMIT, async {
        // Both hosts see the same memory files (a shared checkout) and the same index on the bucket.
        let uri = "s3://team/shared";
        let TwoHosts { ws, a, b, eb } = TwoHosts::open(&moto, uri).await;

        a.sync(SyncOptions::default()).await.unwrap();
        // B reads what A wrote, without indexing or embedding anything itself.
        assert_eq!(top_path(&b, "kubernetes ingress").await.as_deref(), Some("memory/2026-03-15.md"));
        assert_eq!(eb.texts(), 1, "host B embedded documents");
        let rb = b.sync(SyncOptions::default()).await.unwrap();
        assert_eq!((rb.files_unchanged, rb.chunks_embedded), (6, 0), "{rb:?}");

        // B writes; A sees it on its next read.
        write(ws.path(), "memory/2026-06-01.md", "# Pottery\n\nThrew a celadon glazed bowl on the wheel.\n");
        let rb = b.sync(SyncOptions::default()).await.unwrap();
        assert_eq!(rb.files_added, 1, "{rb:?}");
        assert_eq!(top_path(&a, "celadon bowl").await.as_deref(), Some("memory/2026-06-01.md"));
        assert_eq!(a.status().await.unwrap().files, 7);

        // Both write at the same time: each commit lands (conflicts are retried), the table stays consistent.
        write(ws.path(), "memory/2026-06-02.md", "# Birding\n\nSaw a hoopoe near the vineyard.\n");
        write(ws.path(), "memory/2026-06-03.md", "# Baking\n\nSourdough with rye starter, 78 percent hydration.\n");
        let (ra, rb) = tokio::join!(a.sync(SyncOptions::default()), b.sync(SyncOptions::default()));
        let (ra, rb) = (ra.unwrap(), rb.unwrap());
        assert!(ra.files_added + rb.files_added >= 2, "{ra:?} {rb:?}");
        for host in [&a, &b] {
            assert_eq!(top_path(host, "hoopoe").await.as_deref(), Some("memory/2026-06-02.md"));
            assert_eq!(top_path(host, "sourdough hydration").await.as_deref(), Some("memory/2026-06-03.md"));
            let st = host.status().await.unwrap();
            assert_eq!(st.files, 9, "{st:?}");
        }
        // Exactly one record per file and no duplicated chunks after the concurrent writes.
        let r = search(&a, "hoopoe vineyard").await;
        let hoopoe: Vec<_> = r.results.iter().filter(|x| x.path == "memory/2026-06-02.md").collect();
        assert_eq!(hoopoe.len(), 1, "{:?}", r.results);
    })
    .await
    .expect("s3 test took too long");
}

async fn lease_storage(moto: &Moto, uri: &str, lease: Duration) -> LanceDbStorage {
    let opts = memory_lancedb::LanceDbOptions { writer_lease: lease, ..test_options() };
    LanceDbStorage::connect(uri, &moto.storage_options(), "memory_team", opts).await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s3_writer_lease_one_host_at_a_time_and_a_dead_host_expires() {
    use memory_core::store::IndexStorage;
    use memory_core::ErrorKind;
    let moto = Moto::with_bucket("lease");
    tokio::time::timeout(LIMIT, async {
        let uri = "s3://lease/agents/main";
        let lease = Duration::from_secs(2);
        let (a, b) = (lease_storage(&moto, uri, lease).await, lease_storage(&moto, uri, lease).await);

        // One holder at a time; the other host is told, not blocked, when it asks not to wait.
        let held = a.writer_lock(false).await.unwrap();
        assert!(held.is_some(), "s3 storage must have a writer lock");
        let e = b.writer_lock(false).await.expect_err("second host got the lease while it was held");
        assert_eq!(e.kind(), ErrorKind::Unavailable, "{e}");
        assert!(e.to_string().contains("another host"), "{e}");
        // The heartbeat keeps a live holder's lease beyond its period.
        tokio::time::sleep(lease * 2).await;
        assert!(b.writer_lock(false).await.is_err(), "the lease expired while its holder was alive");
        // Released on drop: the other host gets it at once.
        drop(held);
        let held_b = b.writer_lock(false).await.unwrap();
        drop(held_b);

        // A host that dies holding the lease (no heartbeat, no release): simulated by taking it on a runtime
        // that is then shut down, with the guard leaked.
        let dead = lease_storage(&moto, uri, lease).await;
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            let guard = rt.block_on(dead.writer_lock(false)).unwrap();
            std::mem::forget(guard);
            drop(rt);
        })
        .join()
        .unwrap();
        assert!(a.writer_lock(false).await.is_err(), "a fresh lease of a dead host must still be respected");
        let started = std::time::Instant::now();
        let took_over = a.writer_lock(true).await.unwrap();
        let waited = started.elapsed();
        assert!(waited < lease + Duration::from_secs(5), "waited {waited:?} for a dead host's lease of {lease:?}");
        drop(took_over);
        assert!(b.writer_lock(false).await.unwrap().is_some());
    })
    .await
    .expect("s3 lease test took too long");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s3_two_hosts_syncing_at_once_take_turns() {
    let moto = Moto::with_bucket("turns");
    tokio::time::timeout(LIMIT, async {
        let uri = "s3://turns/shared";
        // The workspace must outlive the syncs: bound, not dropped.
        let TwoHosts { ws: _ws, a, b, .. } = TwoHosts::open(&moto, uri).await;
        // Both index the same new workspace at the same instant: with the lease, one indexes it and the other
        // then finds nothing left to do, so every file is embedded once and stored once.
        let (ra, rb) = tokio::join!(a.sync(SyncOptions::default()), b.sync(SyncOptions::default()));
        let (ra, rb) = (ra.unwrap(), rb.unwrap());
        assert_eq!(ra.files_added + rb.files_added, 6, "{ra:?} {rb:?}");
        assert_eq!(ra.chunks_embedded.min(rb.chunks_embedded), 0, "both hosts embedded: {ra:?} {rb:?}");
        for h in [&a, &b] {
            assert_eq!(h.status().await.unwrap().files, 6);
            assert_eq!(top_path(h, "kubernetes ingress").await.as_deref(), Some("memory/2026-03-15.md"));
        }
        // The lease is released after the syncs.
        let s = lease_storage(&moto, uri, Duration::from_secs(30)).await;
        assert!(memory_core::store::IndexStorage::writer_lock(&s, false).await.unwrap().is_some());
    })
    .await
    .expect("s3 test took too long");
}
