//! Shared test helpers: fixture workspaces, opening an engine, and a moto S3 server on loopback.
#![allow(dead_code, reason = "each test binary includes this module and uses only some of its helpers")]

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use memory_core::embedding::EmbeddingProvider;
use memory_core::indexed::IndexedBackend;
use memory_core::{Config, MemoryBackend, SearchRequest, SearchResponse};
use memory_lancedb::{LanceDbOptions, LanceDbStorage};

/// The shared deterministic test embedder (64 dimensions), counting what it embeds.
pub use conformance::BagOfWordsEmbedder as CountingEmbedder;

pub fn write(ws: &Path, rel: &str, text: &str) {
    let p = ws.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

/// A small workspace whose notes each own a topic.
pub fn fixture_workspace(ws: &Path) {
    write(ws, "MEMORY.md", "# Long-term memory\n\nThe user prefers dark roast coffee and writes Rust.\n<!-- importance: 8 -->\n");
    write(
        ws,
        "memory/2026-01-10.md",
        "# Database migration\n\nMoved the billing service from MySQL to PostgreSQL 16. The migration used pg_dump and \
         logical replication; downtime was four minutes.\n",
    );
    write(
        ws,
        "memory/2026-02-03.md",
        "# Hiking trip\n\nPlanned a hiking trip to the Dolomites in July with Anna. Booked the Rifugio Lagazuoi hut \
         for two nights.\n",
    );
    write(
        ws,
        "memory/projects/garden.md",
        "# Garden\n\nTomatoes need watering every morning; the basil went to seed. Compost bin is behind the shed.\n",
    );
    write(
        ws,
        "memory/2026-03-15.md",
        "# Kubernetes upgrade\n\nUpgraded the cluster to Kubernetes 1.31; the ingress controller needed new annotations \
         and cert-manager was bumped.\n",
    );
    write(ws, "memory/notes-zh.md", "# 记忆\n\n我们讨论了向量数据库的索引和检索性能。\n");
}

pub fn config(extra: &str) -> Arc<Config> {
    Arc::new(Config::from_json5(&format!("{{ memory: {{ backend: 'lancedb', search: {{ provider: 'none' {extra} }} }} }}")).unwrap())
}

pub fn test_options() -> LanceDbOptions {
    LanceDbOptions { prune_older_than: Duration::ZERO, ..Default::default() }
}

pub async fn open_local(
    dir: &Path,
    ws: &Path,
    cfg: Arc<Config>,
    embedder: Option<Arc<CountingEmbedder>>,
    options: LanceDbOptions,
) -> (IndexedBackend, Arc<LanceDbStorage>) {
    let storage = Arc::new(LanceDbStorage::connect(dir.to_str().unwrap(), &Default::default(), "memory_test", options).await.unwrap());
    let backend =
        IndexedBackend::open("lancedb", cfg, ws.to_path_buf(), storage.clone(), embedder.map(|e| e as Arc<dyn EmbeddingProvider>)).await.unwrap();
    (backend, storage)
}

/// The start of most local tests: the fixture workspace, an index folder (both temporary) and the counting
/// embedder.
pub struct LocalFixture {
    pub ws: tempfile::TempDir,
    pub db: tempfile::TempDir,
    pub emb: Arc<CountingEmbedder>,
}

impl LocalFixture {
    pub fn new() -> LocalFixture {
        let ws = tempfile::tempdir().unwrap();
        fixture_workspace(ws.path());
        LocalFixture { ws, db: tempfile::tempdir().unwrap(), emb: Arc::new(CountingEmbedder::default()) }
    }

    /// The hybrid engine on the fixture: no extra config, the counting embedder, [`test_options`].
    pub async fn open(&self) -> (IndexedBackend, Arc<LanceDbStorage>) {
        self.open_with(config(""), Some(self.emb.clone()), test_options()).await
    }

    pub async fn open_with(
        &self,
        cfg: Arc<Config>,
        embedder: Option<Arc<CountingEmbedder>>,
        options: LanceDbOptions,
    ) -> (IndexedBackend, Arc<LanceDbStorage>) {
        open_local(self.db.path(), self.ws.path(), cfg, embedder, options).await
    }
}

pub async fn search(b: &dyn MemoryBackend, q: &str) -> SearchResponse {
    let mut r = SearchRequest::new(q);
    r.min_score = Some(0.0);
    b.search(&r).await.unwrap()
}

pub async fn top_path(b: &dyn MemoryBackend, q: &str) -> Option<String> {
    search(b, q).await.results.first().map(|r| r.path.clone())
}

pub fn paths(r: &SearchResponse) -> Vec<String> {
    r.results.iter().map(|x| x.path.clone()).collect()
}

/// moto's S3 server on 127.0.0.1 with a free port, stopped (whole process group) on drop.
pub struct Moto {
    child: std::process::Child,
    pub endpoint: String,
}

pub fn moto_binary() -> PathBuf {
    if let Some(p) = std::env::var_os("MEMORY_MOTO_SERVER") {
        return PathBuf::from(p);
    }
    let cache =
        std::env::var_os("MEMORY_RS_CACHE").map_or_else(|| PathBuf::from(std::env::var_os("HOME").unwrap()).join(".cache/memory-rs"), PathBuf::from);
    cache.join("moto-venv/bin/moto_server")
}

impl Moto {
    pub fn start() -> Moto {
        use std::os::unix::process::CommandExt;
        let bin = moto_binary();
        assert!(bin.exists(), "moto_server not found at {} (run scripts/setup.sh)", bin.display());
        let port = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().port()
        };
        let child = std::process::Command::new(&bin)
            .args(["-H", "127.0.0.1", "-p", &port.to_string()])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .process_group(0)
            .spawn()
            .expect("start moto_server");
        let moto = Moto { child, endpoint: format!("http://127.0.0.1:{port}") };
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        loop {
            if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                break;
            }
            assert!(std::time::Instant::now() < deadline, "moto_server did not start on port {port}");
            std::thread::sleep(Duration::from_millis(100));
        }
        moto
    }

    /// A server holding one (empty) bucket.
    pub fn with_bucket(bucket: &str) -> Moto {
        let moto = Moto::start();
        moto.create_bucket(bucket);
        moto
    }

    /// Create a bucket with a plain path-style PUT (moto does not check signatures).
    pub fn create_bucket(&self, bucket: &str) {
        use std::io::{Read, Write};
        let addr = self.endpoint.trim_start_matches("http://");
        let mut s = std::net::TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        write!(s, "PUT /{bucket} HTTP/1.1\r\nHost: {addr}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n").unwrap();
        let mut resp = String::new();
        s.read_to_string(&mut resp).unwrap();
        assert!(resp.starts_with("HTTP/1.1 200") || resp.starts_with("HTTP/1.0 200"), "create bucket: {resp}");
    }

    pub fn storage_options(&self) -> std::collections::BTreeMap<String, String> {
        [
            ("aws_access_key_id", "testing"),
            ("aws_secret_access_key", "testing"),
            ("aws_region", "us-east-1"),
            ("aws_endpoint", self.endpoint.as_str()),
            ("allow_http", "true"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
    }
}

impl Drop for Moto {
    fn drop(&mut self) {
        let pid = self.child.id() as i32;
        unsafe {
            libc::kill(-pid, libc::SIGTERM);
        }
        let _ = self.child.wait();
    }
}
