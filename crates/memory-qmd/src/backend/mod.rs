//! [`QmdBackend`]: the [`MemoryBackend`] that hands search to the `qmd` command-line tool. Here: opening the
//! engine (its QMD home, collection state, processes) and the trait; its settings are [`crate::config`], the
//! update scheduler `update.rs`, a search `search.rs`, the mapping of qmd's hits to results `results.rs`.

use memory_core::locks::LockExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use memory_core::access;
use memory_core::backend::MemoryBackend;
use memory_core::config::{Citations, Config};
use memory_core::discovery::MemoryRoots;
use memory_core::error::{MemoryError, Result};
use memory_core::registry::{BackendFactory, OpenContext};
use memory_core::types::{Capabilities, GetRequest, GetResponse, SearchRequest, SearchResponse, Status, SyncOptions, SyncReport};
use serde_json::{json, Value};
use tokio::task::JoinHandle;
use tracing::{info, warn};

use crate::collections::Collection;
use crate::config::{QmdConfig, SearchMode};
use crate::parse::UpdateCounts;
use crate::process::{self, Invocation, RunSpec};

mod dates;
mod results;
mod search;
mod update;

use update::Trigger;

/// Options beyond the config file, for embedding hosts and tests.
#[derive(Debug, Clone, Default)]
pub struct QmdOptions {
    /// Extra environment for every `qmd` process (e.g. `HF_ENDPOINT`).
    pub env: Vec<(String, String)>,
}

/// Opens [`QmdBackend`]s; register it as `qmd`.
#[derive(Debug, Clone, Default)]
pub struct QmdFactory {
    pub options: QmdOptions,
}

impl QmdFactory {
    pub const NAME: &'static str = crate::config::NAME;

    pub fn new() -> Self {
        Self::default()
    }

    pub fn with_options(options: QmdOptions) -> Self {
        QmdFactory { options }
    }
}

#[async_trait]
impl BackendFactory for QmdFactory {
    async fn open(&self, ctx: OpenContext) -> Result<Box<dyn MemoryBackend>> {
        Ok(Box::new(QmdBackend::open(ctx, self.options.clone()).await?))
    }

    fn check_config(&self, config: &Config) -> Result<()> {
        QmdConfig::from_config(config).map(drop)
    }

    fn config_warnings(&self, config: &Config) -> Vec<memory_core::config::ConfigIssue> {
        QmdConfig::from_config(config).map(|c| c.ignored_keys()).unwrap_or_default()
    }
}

#[derive(Debug, Default)]
struct RunState {
    /// Collections registered with QMD (as last written to the state file).
    registered: Vec<Collection>,
    last_update_ms: Option<i64>,
    last_update_done: Option<Instant>,
    /// The memory files (paths, sizes, mtimes) as the last successful update started from.
    files_updated: Option<String>,
    last_counts: Option<UpdateCounts>,
    last_update_error: Option<String>,
    last_embed_ms: Option<i64>,
    last_embed_error: Option<String>,
    updates: u64,
    update_running: bool,
}

struct Inner {
    invocation: Invocation,
    home: PathBuf,
    env: Vec<(String, String)>,
    workspace: PathBuf,
    roots: MemoryRoots,
    cfg: QmdConfig,
    mode: SearchMode,
    citations: Citations,
    max_file_bytes: u64,
    on_search_update: bool,
    /// Transcripts exported for QMD when `memory.qmd.sessions.enabled`.
    sessions: Option<SessionsExport>,
    /// Serialises everything that writes QMD's index (collection changes, update, embed).
    write_lock: tokio::sync::Mutex<()>,
    state: Mutex<RunState>,
    closed: AtomicBool,
    /// Background work (boot update, timers, embeds, updates after searches); aborted on close and drop.
    tasks: Mutex<Vec<JoinHandle<()>>>,
    /// The second stage `memory.search.query.rerank` turned on (core's, as the indexed engines run it).
    reranker: Option<Arc<dyn memory_core::rerank::Reranker>>,
    rerank: memory_core::config::RerankConfig,
}

#[derive(Debug, Clone)]
struct SessionsExport {
    /// The JSONL transcripts.
    src: PathBuf,
    /// Their Markdown exports (the `sessions` collection).
    out: PathBuf,
    retention_days: Option<u64>,
}

/// The QMD engine for one agent and workspace: a self-contained QMD home (`AgentSpace::engine_home`).
pub struct QmdBackend {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for QmdBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QmdBackend").field("home", &self.inner.home).field("command", &self.inner.invocation).finish()
    }
}

const STATE_FILE: &str = "collections.json";
/// How long `close` waits for an update or embed in flight.
const CLOSE_GRACE: Duration = Duration::from_secs(2);
/// The shortest time limit of a qmd run (a `0` in `update.*TimeoutMs` means this, as before).
const MIN_TIMEOUT: Duration = Duration::from_millis(1);

impl QmdBackend {
    /// Open the engine: find qmd and Node 22, prepare the QMD home, then run the boot update (awaited when
    /// `update.waitForBootSync`, else in the background) and start the update/embed timers.
    pub async fn open(ctx: OpenContext, options: QmdOptions) -> Result<QmdBackend> {
        let cfg = QmdConfig::from_config(&ctx.config)?;
        let mode = cfg.search_mode;
        let invocation = locate_blocking(cfg.command.clone()).await?;
        let home = ctx.space.engine_home("qmd");
        for d in ["config", "cache"] {
            std::fs::create_dir_all(home.join(d)).map_err(|e| MemoryError::io_path("cannot create", &home.join(d), e))?;
        }
        let mut extra: Vec<memory_core::config::ExtraPath> = ctx.config.memory.search.extra_paths.clone();
        extra.extend(cfg.paths.iter().map(|p| memory_core::config::ExtraPath::Pattern { path: p.path.clone(), pattern: p.pattern.clone() }));
        let roots = MemoryRoots::new(ctx.workspace().to_path_buf(), &extra);
        let registered = read_state(&home);
        let sessions = cfg.sessions.enabled.then(|| SessionsExport {
            src: ctx.space.sessions_dir().to_path_buf(),
            out: crate::sessions::export_dir(&home, cfg.sessions.export_dir.as_deref()),
            retention_days: cfg.sessions.retention_days,
        });
        let mut env = vec![
            ("XDG_CONFIG_HOME".to_string(), home.join("config").to_string_lossy().into_owned()),
            ("XDG_CACHE_HOME".to_string(), home.join("cache").to_string_lossy().into_owned()),
            ("NO_COLOR".to_string(), "1".to_string()),
            ("FORCE_COLOR".to_string(), "0".to_string()),
        ];
        env.extend(options.env);
        let inner = Arc::new(Inner {
            invocation,
            home,
            env,
            workspace: ctx.workspace().to_path_buf(),
            roots,
            mode,
            citations: ctx.config.memory.citations,
            max_file_bytes: ctx.config.memory.search.max_file_bytes,
            on_search_update: ctx.config.memory.search.sync.on_search,
            sessions,
            cfg,
            write_lock: tokio::sync::Mutex::new(()),
            state: Mutex::new(RunState { registered, ..Default::default() }),
            closed: AtomicBool::new(false),
            tasks: Mutex::new(Vec::new()),
            reranker: ctx.reranker.clone(),
            rerank: ctx.config.memory.search.query.rerank.clone(),
        });
        info!(home = %inner.home.display(), command = %inner.invocation.describe(), mode = mode.as_str(), "qmd engine opened");
        let backend = QmdBackend { inner: inner.clone() };

        backend.start_updates().await?;
        Ok(backend)
    }

    fn spawn(&self, fut: impl std::future::Future<Output = ()> + Send + 'static) {
        self.inner.spawn(fut);
    }

    /// The QMD home (its `config/` and `cache/` are QMD's XDG folders).
    pub fn home(&self) -> &Path {
        &self.inner.home
    }

    /// How qmd is run.
    pub fn invocation(&self) -> &Invocation {
        &self.inner.invocation
    }

    /// The collections registered with QMD.
    pub fn collections(&self) -> Vec<Collection> {
        self.inner.state.locked().registered.clone()
    }

    /// Run `qmd embed` now (serialised with updates).
    pub async fn embed(&self) -> Result<()> {
        self.inner.embed().await
    }

    /// Map a `qmd://collection/path` URI to the file on disk.
    pub fn resolve_uri(&self, uri: &str) -> Option<PathBuf> {
        self.inner.resolve_uri(uri)
    }
}

impl Drop for QmdBackend {
    fn drop(&mut self) {
        // The tasks hold the engine's state alive: abort them (their qmd processes are killed with them).
        self.inner.closed.store(true, Ordering::SeqCst);
        for t in self.inner.tasks.locked().drain(..) {
            t.abort();
        }
    }
}

async fn locate_blocking(command: Option<String>) -> Result<Invocation> {
    tokio::task::spawn_blocking(move || crate::locate::resolve(command.as_deref()))
        .await
        .map_err(|e| MemoryError::Internal(format!("locating qmd: {e}")))?
}

fn read_state(home: &Path) -> Vec<Collection> {
    let path = home.join(STATE_FILE);
    match std::fs::read(&path) {
        Ok(bytes) => serde_json::from_slice(&bytes).unwrap_or_else(|e| {
            warn!(path = %path.display(), error = %e, "unreadable qmd collection state; collections will be re-added");
            Vec::new()
        }),
        Err(_) => Vec::new(),
    }
}

fn write_state(home: &Path, cols: &[Collection]) -> Result<()> {
    let path = home.join(STATE_FILE);
    let tmp = home.join(format!("{STATE_FILE}.tmp"));
    let bytes = serde_json::to_vec_pretty(cols).map_err(|e| MemoryError::Internal(e.to_string()))?;
    std::fs::write(&tmp, bytes).map_err(|e| MemoryError::io_path("cannot write", &tmp, e))?;
    std::fs::rename(&tmp, &path).map_err(|e| MemoryError::io_path("cannot write", &path, e))
}

impl Inner {
    fn spawn(&self, fut: impl std::future::Future<Output = ()> + Send + 'static) {
        if self.closed.load(Ordering::SeqCst) {
            return;
        }
        let handle = tokio::spawn(fut);
        let mut tasks = self.tasks.locked();
        tasks.retain(|t| !t.is_finished());
        tasks.push(handle);
    }

    fn run_spec(&self, args: Vec<String>, timeout: Duration) -> RunSpec<'_> {
        RunSpec { invocation: &self.invocation, args, env: self.env.clone(), cwd: self.home.clone(), timeout }
    }

    async fn run(&self, what: &str, args: Vec<String>, timeout: Duration) -> Result<process::Output> {
        if self.closed.load(Ordering::SeqCst) {
            return Err(MemoryError::Unavailable("the qmd engine is closed".into()));
        }
        process::run(self.run_spec(args, timeout)).await.map_err(|e| e.into_memory_error(what))
    }
}

#[async_trait]
impl MemoryBackend for QmdBackend {
    fn name(&self) -> &str {
        QmdFactory::NAME
    }

    fn capabilities(&self) -> Capabilities {
        let v = self.inner.mode.needs_vectors();
        Capabilities {
            keyword: self.inner.mode != SearchMode::VSearch,
            vector: v,
            hybrid: self.inner.mode == SearchMode::Query,
            persistent: true,
            // QMD ranks with its own BM25 and snippets: no decay, importance, MMR or exact-path tiers.
            shared_ranking: false,
            // QMD indexes CJK characters one by one and matches CJK words as phrases; the keyword mode's
            // any-word retry splits CJK sentences into bigrams (conformance cjk suite). Not checked for the
            // model-backed modes.
            cjk: self.inner.mode == SearchMode::Search,
            sessions: self.inner.sessions.is_some(),
            // qmd's scores are its own: there are no factors of this project's ranking to show.
            explain: false,
        }
    }

    async fn search(&self, request: &SearchRequest) -> Result<SearchResponse> {
        let mut response = self.answer(request).await?;
        if !request.active_project_keys.is_empty() {
            // QMD ranks with its own scores: project tags cannot act in them. Said, not silently ignored.
            response.warnings.push("the qmd engine does not apply project scoping: active project keys were not used in ranking".into());
        }
        if request.explains() {
            // qmd scores and orders its hits itself: there are no factors of this project's ranking to show.
            response.warnings.push(
                "the qmd engine ranks with qmd's own scores and cannot explain them: explain shows the builtin and lancedb engines' rankings".into(),
            );
        }
        Ok(response)
    }

    async fn get(&self, request: &GetRequest) -> Result<GetResponse> {
        let inner = &self.inner;
        let mut req = request.clone();
        if request.path.trim_start().starts_with("qmd://") {
            if request.path.split('/').any(|seg| seg == "..") {
                return Err(MemoryError::Refused(format!("{}: `..` is not allowed in memory paths", request.path)));
            }
            let abs = inner
                .resolve_uri(request.path.trim())
                .ok_or_else(|| MemoryError::NotFound(format!("{}: not a file of a qmd collection of this agent", request.path)))?;
            req.path = abs.to_string_lossy().into_owned();
        }
        let roots = inner.roots.clone();
        let max = inner.max_file_bytes;
        tokio::task::spawn_blocking(move || access::read(&roots, &req, max)).await.map_err(|e| MemoryError::Internal(format!("memory_get: {e}")))?
    }

    async fn sync(&self, options: SyncOptions) -> Result<SyncReport> {
        let counts = self.inner.clone().update(Trigger::Sync { force: options.force }).await?.unwrap_or_default();
        Ok(SyncReport {
            files_scanned: counts.files(),
            files_added: counts.new,
            files_changed: counts.updated,
            files_removed: counts.removed,
            files_unchanged: counts.unchanged,
            rebuilt: options.force,
            ..Default::default()
        })
    }

    async fn status(&self) -> Result<Status> {
        let inner = &self.inner;
        let st = inner.state.locked();
        let cols: Vec<Value> = st.registered.iter().map(|c| json!({"name": c.name, "path": c.root.to_string_lossy(), "mask": c.mask})).collect();
        let mut extra = serde_json::Map::new();
        extra.insert("command".into(), json!(inner.invocation.describe()));
        extra.insert("home".into(), json!(inner.home.to_string_lossy()));
        extra.insert("searchMode".into(), json!(inner.mode.as_str()));
        extra.insert("collections".into(), json!(cols));
        extra.insert("updates".into(), json!(st.updates));
        extra.insert("updateRunning".into(), json!(st.update_running));
        if let Some(e) = &st.last_update_error {
            extra.insert("lastUpdateError".into(), json!(e));
        }
        if let Some(ms) = st.last_embed_ms {
            extra.insert("lastEmbedMs".into(), json!(ms));
        }
        if let Some(e) = &st.last_embed_error {
            extra.insert("lastEmbedError".into(), json!(e));
        }
        let mut warnings = Vec::new();
        if let Some(e) = &st.last_update_error {
            warnings.push(format!("last qmd update failed: {e}"));
        }
        if inner.mode.needs_vectors() {
            if let Some(e) = &st.last_embed_error {
                warnings.push(format!("last qmd embed failed: {e}"));
            }
        }
        Ok(Status {
            backend: QmdFactory::NAME.into(),
            workspace: inner.workspace.to_string_lossy().into_owned(),
            index_path: Some(inner.home.join("cache/qmd/index.sqlite").to_string_lossy().into_owned()),
            files: st.last_counts.map_or(0, |c| c.files()),
            // QMD's BM25 index ranks whole documents: in keyword mode each file is one searchable unit. Its
            // embedding chunks (vsearch/query) are not counted by any qmd output we read.
            chunks: if inner.mode == SearchMode::Search { st.last_counts.map_or(0, |c| c.files()) } else { 0 },
            capabilities: self.capabilities(),
            provider: None,
            model: None,
            dimensions: None,
            last_sync_ms: st.last_update_ms,
            dirty: st.last_update_ms.is_none() || st.last_update_error.is_some(),
            // qmd keeps no settings that would call for a rebuild.
            rebuild_pending: false,
            fallback: None,
            warnings,
            // QMD reads the files itself and says nothing of those it leaves out.
            skipped: Vec::new(),
            extra,
        })
    }

    /// Delete QMD's index and this engine's collection registrations (downloaded models stay); the next update
    /// registers the collections again and re-indexes every file.
    async fn reset(&self) -> Result<()> {
        let inner = &self.inner;
        let _guard = inner.write_lock.lock().await;
        let gone = |p: PathBuf| match std::fs::remove_file(&p) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(MemoryError::io_path("cannot remove", &p, e)),
        };
        let db = inner.home.join("cache/qmd/index.sqlite");
        for suffix in ["", "-wal", "-shm"] {
            gone(PathBuf::from(format!("{}{suffix}", db.display())))?;
        }
        match std::fs::remove_dir_all(inner.home.join("config/qmd")) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                return Err(MemoryError::io_path("cannot remove", &inner.home.join("config/qmd"), e))
            }
            _ => {}
        }
        write_state(&inner.home, &[])?;
        let mut st = inner.state.locked();
        st.registered.clear();
        st.files_updated = None;
        st.last_update_ms = None;
        st.last_update_done = None;
        st.last_counts = None;
        info!(home = %inner.home.display(), "qmd index reset");
        Ok(())
    }

    async fn close(&self) -> Result<()> {
        self.inner.closed.store(true, Ordering::SeqCst);
        // Give an update or embed in flight a moment to finish rather than killing it mid-write (a one-shot CLI
        // search closes right after its boot update started); then stop everything.
        if tokio::time::timeout(CLOSE_GRACE, self.inner.write_lock.lock()).await.is_err() {
            warn!("qmd update still running at close; killing it");
        }
        let tasks: Vec<_> = self.inner.tasks.locked().drain(..).collect();
        for t in tasks {
            t.abort();
            let _ = t.await;
        }
        Ok(())
    }
}
