//! [`QmdBackend`]: the [`MemoryBackend`] that hands search to the `qmd` command-line tool.

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
use memory_core::types::{
    Capabilities, GetRequest, GetResponse, SearchRequest, SearchResponse, SearchResult, Source, Status, SyncOptions,
    SyncReport,
};
use serde_json::{json, Value};
use tokio::task::JoinHandle;
use tracing::{debug, info, warn};

use crate::collections::{self, Collection};
use crate::config::{QmdConfig, SearchMode};
use crate::parse::{self, QmdHit, UpdateCounts};
use crate::process::{self, Invocation, RunError, RunSpec};

/// What asked for an update.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Trigger {
    /// Start of the engine (not debounced; followed by `embed` when the mode needs vectors).
    Boot,
    /// The update timer (debounced).
    Interval,
    /// A search noticed results may be stale (debounced).
    Search,
    /// A search found memory files changed since the last update: it waits for this one (not debounced).
    Changed,
    /// An explicit sync (not debounced); `force` re-creates every collection.
    Sync { force: bool },
}

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
}

#[derive(Debug, Clone)]
struct SessionsExport {
    /// The JSONL transcripts.
    src: PathBuf,
    /// Their Markdown exports (the `sessions` collection).
    out: PathBuf,
    retention_days: Option<u64>,
}

/// The QMD engine for one agent: a self-contained QMD home under `<state_dir>/qmd/<agentId>`.
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
        let (update_every, embed_every) = (cfg.update.interval, cfg.update.embed_interval);
        let invocation = locate_blocking(cfg.command.clone()).await?;
        let home = ctx.state_dir.join("qmd").join(memory_core::sanitize_id(&ctx.agent_id));
        for d in ["config", "cache"] {
            std::fs::create_dir_all(home.join(d)).map_err(|e| MemoryError::io_path("cannot create", &home.join(d), e))?;
        }
        let mut extra: Vec<memory_core::config::ExtraPath> = ctx.config.memory.search.extra_paths.clone();
        extra.extend(cfg.paths.iter().map(|p| memory_core::config::ExtraPath::Pattern { path: p.path.clone(), pattern: p.pattern.clone() }));
        let roots = MemoryRoots::new(ctx.workspace.clone(), &extra);
        let registered = read_state(&home);
        let sessions = cfg.sessions.enabled.then(|| SessionsExport {
            src: memory_core::sessions::sessions_dir(&ctx.config, &ctx.state_dir, &ctx.agent_id),
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
            workspace: ctx.workspace.clone(),
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
        });
        info!(home = %inner.home.display(), command = %inner.invocation.describe(), mode = mode.as_str(), "qmd engine opened");
        let backend = QmdBackend { inner: inner.clone() };

        if inner.cfg.update.on_boot {
            if inner.cfg.update.wait_for_boot_sync {
                inner.clone().update(Trigger::Boot).await?;
            } else {
                let i = inner.clone();
                backend.spawn(async move {
                    if let Err(e) = i.clone().update(Trigger::Boot).await {
                        warn!(error = %e, "qmd boot update failed");
                    }
                });
            }
        }
        if let Some(every) = update_every {
            let i = inner.clone();
            backend.spawn(async move {
                loop {
                    tokio::time::sleep(every).await;
                    if let Err(e) = i.clone().update(Trigger::Interval).await {
                        warn!(error = %e, "qmd interval update failed");
                    }
                }
            });
        }
        if let (Some(every), true) = (embed_every, mode.needs_vectors()) {
            let i = inner.clone();
            backend.spawn(async move {
                loop {
                    tokio::time::sleep(every).await;
                    if let Err(e) = i.embed().await {
                        warn!(error = %e, "qmd embed failed");
                    }
                }
            });
        }
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
        self.inner.state.lock().unwrap().registered.clone()
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
        for t in self.inner.tasks.lock().unwrap().drain(..) {
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

/// True when qmd's complaint is about its command-line flags (so another mode may work).
fn flags_rejected(stderr: &str) -> bool {
    let s = stderr.to_ascii_lowercase();
    ["unknown option", "unknown flag", "unrecognized option", "unrecognised option", "invalid option", "unexpected argument", "unknown argument"]
        .iter()
        .any(|p| s.contains(p))
}

/// One line of query text: control characters and newlines become spaces (a newline would turn a `query` into
/// a structured query document).
fn normalize_query(q: &str) -> String {
    q.split(|c: char| c.is_control() || c.is_whitespace()).filter(|s| !s.is_empty()).collect::<Vec<_>>().join(" ")
}

fn truncate_chars(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        Some((i, _)) => s[..i].to_string(),
        None => s.to_string(),
    }
}

impl Inner {
    fn spawn(&self, fut: impl std::future::Future<Output = ()> + Send + 'static) {
        if self.closed.load(Ordering::SeqCst) {
            return;
        }
        let handle = tokio::spawn(fut);
        let mut tasks = self.tasks.lock().unwrap();
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

    fn update_timeout(&self) -> Duration {
        self.cfg.update.update_timeout.max(MIN_TIMEOUT)
    }

    /// Make QMD's collections match the plan: remove stale ones, add missing ones (adding indexes them).
    async fn ensure_collections(&self, force: bool) -> Result<bool> {
        let want = collections::plan(&self.workspace, &self.cfg, self.sessions.as_ref().map(|s| s.out.as_path()));
        let have = self.state.lock().unwrap().registered.clone();
        if !force && want == have {
            return Ok(false);
        }
        if self.cfg.include_default_memory {
            let dir = self.workspace.join("memory");
            if !dir.exists() {
                std::fs::create_dir_all(&dir).map_err(|e| MemoryError::io_path("cannot create", &dir, e))?;
            }
        }
        let timeout = self.update_timeout();
        let mut registered: Vec<Collection> = have.iter().filter(|c| want.contains(c)).cloned().collect();
        let command_timeout = self.cfg.update.command_timeout.max(MIN_TIMEOUT);
        for c in &have {
            if force || !want.contains(c) {
                self.remove_collection(&c.name, command_timeout).await?;
                registered.retain(|r| r.name != c.name);
                // Keep the state file true to QMD at every step, so an interruption never leaves it lying.
                write_state(&self.home, &registered)?;
            }
        }
        for c in &want {
            if registered.contains(c) {
                continue;
            }
            let args = |c: &Collection| {
                vec![
                    "collection".to_string(),
                    "add".into(),
                    c.root.to_string_lossy().into_owned(),
                    "--name".into(),
                    c.name.clone(),
                    "--mask".into(),
                    c.mask.clone(),
                ]
            };
            match self.run("qmd collection add", args(c), timeout).await {
                Ok(_) => {}
                Err(e) if e.to_string().contains("already exists") => {
                    // QMD knows it from a run whose state file was lost: replace it.
                    self.remove_collection(&c.name, command_timeout).await?;
                    self.run("qmd collection add", args(c), timeout).await?;
                }
                Err(e) => return Err(e),
            }
            info!(name = %c.name, root = %c.root.display(), mask = %c.mask, "qmd collection added");
            registered.push(c.clone());
            write_state(&self.home, &registered)?;
        }
        self.state.lock().unwrap().registered = registered;
        Ok(true)
    }

    async fn remove_collection(&self, name: &str, timeout: Duration) -> Result<()> {
        match self.run("qmd collection remove", vec!["collection".into(), "remove".into(), name.into()], timeout).await {
            Ok(_) => Ok(()),
            Err(e) if e.to_string().to_ascii_lowercase().contains("not found") => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Bring QMD's index in step with the files. Serialised: two updates never run at once. Unless `force`,
    /// an update finished less than `debounceMs` ago makes this a no-op (`None`).
    async fn update(self: Arc<Self>, trigger: Trigger) -> Result<Option<UpdateCounts>> {
        let _guard = self.write_lock.lock().await;
        if matches!(trigger, Trigger::Interval | Trigger::Search) {
            let debounce = self.cfg.update.debounce;
            let recent = self.state.lock().unwrap().last_update_done.is_some_and(|t| t.elapsed() < debounce);
            if recent {
                debug!(?trigger, "qmd update skipped (debounced)");
                return Ok(None);
            }
        }
        if trigger == Trigger::Changed {
            // An update that ran while this one waited for the lock may have covered the change already.
            let now = self.files_fingerprint();
            if self.state.lock().unwrap().files_updated.as_deref() == Some(now.as_str()) {
                return Ok(None);
            }
        }
        let force = matches!(trigger, Trigger::Sync { force: true });
        let boot = trigger == Trigger::Boot;
        self.state.lock().unwrap().update_running = true;
        // Taken before the update runs: a file changed while it runs is seen as changed by the next search.
        let files_before = self.files_fingerprint();
        let result = async {
            if let Some(s) = self.sessions.clone() {
                let r = tokio::task::spawn_blocking(move || crate::sessions::export(&s.src, &s.out, s.retention_days))
                    .await
                    .map_err(|e| MemoryError::Internal(format!("exporting transcripts: {e}")))?;
                if let Err(e) = r {
                    // Memory files are still worth updating; the transcripts stay as last exported.
                    warn!(error = %e, "cannot export session transcripts for qmd");
                }
            }
            self.ensure_collections(force).await?;
            let out = self.run("qmd update", vec!["update".into()], self.update_timeout()).await?;
            Ok::<_, MemoryError>(parse::parse_update(&out.stdout))
        }
        .await;
        let mut st = self.state.lock().unwrap();
        st.update_running = false;
        st.updates += 1;
        st.last_update_done = Some(Instant::now());
        match &result {
            Ok(c) => {
                st.files_updated = Some(files_before);
                st.last_update_ms = Some(memory_core::now_ms());
                st.last_counts = Some(*c);
                st.last_update_error = None;
                info!(new = c.new, updated = c.updated, removed = c.removed, unchanged = c.unchanged, "qmd update done");
            }
            Err(e) => st.last_update_error = Some(e.to_string()),
        }
        drop(st);
        let counts = result?;
        if boot && self.mode.needs_vectors() {
            // Vectors are needed by this mode: embed right after the boot update, in the background.
            let me = self.clone();
            self.spawn(async move {
                if let Err(e) = me.embed().await {
                    warn!(error = %e, "qmd embed after boot failed");
                }
            });
        }
        Ok(Some(counts))
    }

    /// What the memory files are now, as a stat of each (transcripts follow their own thresholds).
    fn files_fingerprint(&self) -> String {
        let mut text = String::new();
        for f in memory_core::discovery::discover(&self.roots) {
            text.push_str(&format!("{}\0{}\0{}\n", f.key, f.size, f.mtime_ms));
        }
        memory_core::sha256_hex(text.as_bytes())
    }

    /// Before a search (`sync.onSearch`): when a memory file was added, changed or removed since the last
    /// update, run `qmd update` first (bounded by its timeout), so the search sees it. QMD's CLI cannot update
    /// one file: this costs an update of the collections, which QMD keeps incremental by content hash.
    async fn freshen(self: &Arc<Self>, warnings: &mut Vec<String>) {
        let now = self.files_fingerprint();
        if self.state.lock().unwrap().files_updated.as_deref() == Some(now.as_str()) {
            return;
        }
        if let Err(e) = self.clone().update(Trigger::Changed).await {
            warn!(error = %e, "qmd update before search failed; answering from its index as it is");
            warnings.push(format!("memory files changed but qmd could not update its index ({e}); deleted files are left out"));
        }
    }

    async fn embed(&self) -> Result<()> {
        let _guard = self.write_lock.lock().await;
        let timeout = self.cfg.update.embed_timeout.max(MIN_TIMEOUT);
        let r = self.run("qmd embed", vec!["embed".into()], timeout).await;
        let mut st = self.state.lock().unwrap();
        match &r {
            Ok(_) => {
                st.last_embed_ms = Some(memory_core::now_ms());
                st.last_embed_error = None;
            }
            Err(e) => st.last_embed_error = Some(e.to_string()),
        }
        r.map(|_| ())
    }

    fn resolve_uri(&self, uri: &str) -> Option<PathBuf> {
        let (name, rel) = parse::split_qmd_uri(uri)?;
        let st = self.state.lock().unwrap();
        let c = st.registered.iter().find(|c| c.name == name)?;
        if rel.split('/').any(|seg| seg == "..") {
            return None;
        }
        Some(c.root.join(rel))
    }

    async fn run_search(&self, mode: SearchMode, query: &str, limit: usize, names: &[String]) -> Result<(Vec<QmdHit>, String), RunError> {
        let mut args = vec![mode.as_str().to_string(), "--json".into(), "-n".into(), limit.to_string()];
        for n in names {
            args.push("-c".into());
            args.push(n.clone());
        }
        args.push("--".into());
        args.push(query.to_string());
        let timeout = self.cfg.limits.timeout;
        let out = process::run(self.run_spec(args, timeout)).await?;
        if out.stdout_truncated {
            return Ok((Vec::new(), "\u{0}truncated".into()));
        }
        match parse::parse_hits(&out.stdout) {
            Ok(hits) => Ok((hits, out.stderr)),
            Err(e) => Ok((Vec::new(), format!("\u{0}{e}"))),
        }
    }

    /// `qmd query --no-rerank` with a document of `lex:` lines (see [`crate::query::any_word_document`]).
    async fn run_any_word(&self, doc: &str, limit: usize, names: &[String]) -> Result<(Vec<QmdHit>, String), RunError> {
        let mut args = vec!["query".to_string(), "--json".into(), "--no-rerank".into(), "-n".into(), limit.to_string()];
        for n in names {
            args.push("-c".into());
            args.push(n.clone());
        }
        args.push("--".into());
        args.push(doc.to_string());
        let out = process::run(self.run_spec(args, self.cfg.limits.timeout)).await?;
        if out.stdout_truncated {
            return Ok((Vec::new(), "\u{0}truncated".into()));
        }
        match parse::parse_hits(&out.stdout) {
            Ok(hits) => Ok((hits, out.stderr)),
            Err(e) => Ok((Vec::new(), format!("\u{0}{e}"))),
        }
    }

    fn to_result(&self, hit: &QmdHit) -> Option<SearchResult> {
        let abs = self.resolve_uri(&hit.file).or_else(|| {
            // Not a qmd:// URI (e.g. --full-path output): take it as a path.
            let p = Path::new(&hit.file);
            (!hit.file.starts_with("qmd://")).then(|| if p.is_absolute() { p.to_path_buf() } else { self.workspace.join(p) })
        })?;
        let session_md = self
            .sessions
            .as_ref()
            .and_then(|_| parse::split_qmd_uri(&hit.file))
            .filter(|(c, _)| *c == crate::sessions::SESSIONS_COLLECTION)
            .map(|(_, rel)| rel.to_string());
        let path = match &session_md {
            Some(rel) => crate::sessions::transcript_key(rel),
            None => self.roots.key_for(&abs),
        };
        let lines: Vec<&str> = hit.text.split('\n').collect();
        let lead = lines.iter().take_while(|l| l.trim().is_empty()).count();
        let trail = if lead == lines.len() { 0 } else { lines.iter().rev().take_while(|l| l.trim().is_empty()).count() };
        let body = if lead == lines.len() { String::new() } else { lines[lead..lines.len() - trail].join("\n") };
        let (start, end) = match (hit.start_line, hit.line_count) {
            (Some(s), Some(c)) => {
                let covered = c.max(1).saturating_sub(trail.min(c.saturating_sub(1)));
                let start = s + lead.min(covered.saturating_sub(1));
                let end = (s + covered - 1).max(start);
                (start, end)
            }
            (Some(s), None) => (s, s + body.lines().count().max(1) - 1),
            (None, _) => {
                let l = hit.line.unwrap_or(1).max(1);
                (l, l)
            }
        };
        let snippet = truncate_chars(&body, self.cfg.limits.max_snippet_chars);
        let (start, end, source) = match (&session_md, &self.sessions) {
            (Some(rel), Some(s)) => {
                // Markdown lines of the export back to the transcript's JSONL lines.
                let map = crate::sessions::line_map(&s.out, rel).unwrap_or_default();
                let to_jsonl = |n: usize| map.get(n.saturating_sub(1)).copied().unwrap_or(n);
                (to_jsonl(start), to_jsonl(end), Source::Sessions)
            }
            _ => (start, end, Source::Memory),
        };
        Some(SearchResult {
            path,
            start_line: start,
            end_line: end,
            score: hit.score,
            snippet,
            source,
            vector_score: None,
            text_score: None,
            citation: None,
        })
    }

    fn apply_citation(&self, r: &mut SearchResult) {
        if self.citations == Citations::Off {
            return;
        }
        let cite = memory_core::ranking::citation(&r.path, r.start_line, r.end_line);
        if self.citations == Citations::On {
            r.snippet.push_str(&format!("\nSource: {cite}"));
        }
        r.citation = Some(cite);
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
        }
    }

    async fn search(&self, request: &SearchRequest) -> Result<SearchResponse> {
        let inner = &self.inner;
        let query = normalize_query(&request.query);
        if query.is_empty() {
            return Err(MemoryError::InvalidInput("query is empty".into()));
        }
        if !request.sources.is_empty()
            && !request.sources.contains(&Source::Memory)
            && inner.sessions.is_none()
        {
            return Ok(SearchResponse {
                results: vec![],
                mode: Some(inner.mode.response_mode().into()),
                warnings: vec!["session transcripts are not indexed (memory.qmd.sessions.enabled is off)".into()],
            });
        }
        let registered: Vec<String> = inner.state.lock().unwrap().registered.iter().map(|c| c.name.clone()).collect();
        let wanted = |name: &str| {
            let is_sessions = inner.sessions.is_some() && name == crate::sessions::SESSIONS_COLLECTION;
            request.sources.is_empty() || request.sources.contains(if is_sessions { &Source::Sessions } else { &Source::Memory })
        };
        let names: Vec<String> = registered.iter().filter(|n| wanted(n)).cloned().collect();
        if names.is_empty() && !registered.is_empty() {
            return Ok(SearchResponse { results: vec![], mode: Some(inner.mode.response_mode().into()), warnings: vec![] });
        }
        if names.is_empty() {
            let running = inner.state.lock().unwrap().update_running;
            return Err(MemoryError::Unavailable(if running {
                "qmd is still building its index (first update running)".into()
            } else {
                "qmd has no collections yet (no update has completed)".into()
            }));
        }
        let max = request.max_results.unwrap_or(inner.cfg.limits.max_results).clamp(1, 100);
        let started = Instant::now();
        let mut mode = inner.mode;
        let mut warnings = Vec::new();
        if inner.on_search_update {
            inner.freshen(&mut warnings).await;
        }
        // Keyword mode: plain words only (QMD's own syntax never sees user text), every word required first.
        let terms = (mode == SearchMode::Search).then(|| crate::query::keyword_terms(&query));
        let query = match &terms {
            Some(t) if t.is_empty() => {
                // Only punctuation or syntax characters: no word to look for.
                return Ok(SearchResponse { results: vec![], mode: Some(mode.response_mode().into()), warnings });
            }
            Some(t) => crate::query::all_words_query(t),
            None => query,
        };
        let mut attempt = inner.run_search(mode, &query, max, &names).await;
        if let Err(e) = &attempt {
            if mode != SearchMode::Query && flags_rejected(e.stderr()) {
                warn!(mode = mode.as_str(), "qmd rejected the mode's flags; retrying as `query`");
                warnings.push(format!("qmd rejected `{}` flags; answered with `query`", mode.as_str()));
                mode = SearchMode::Query;
                attempt = inner.run_search(mode, &query, max, &names).await;
            }
        }
        let mut what = format!("qmd {}", mode.as_str());
        let (mut hits, mut stderr) = attempt.map_err(|e| e.into_memory_error(&what))?;
        if let Some(msg) = stderr.strip_prefix('\u{0}') {
            return Err(MemoryError::Internal(format!("{what}: {msg}")));
        }
        if hits.is_empty() && mode == SearchMode::VSearch && stderr.contains("(100%) need embeddings") {
            return Err(MemoryError::Unavailable(format!(
                "{what}: no document has embeddings yet (run `qmd embed`; it needs the embedding model)"
            )));
        }
        if let (true, SearchMode::Search, Some(doc)) =
            (hits.is_empty(), mode, terms.as_deref().and_then(crate::query::any_word_document))
        {
            // No note holds every word (most questions): ask again for any word. One `lex:` sub-query per
            // word, fused by QMD (reciprocal rank); lexical only, so no model is loaded.
            what = "qmd query (any word)".into();
            (hits, stderr) = inner.run_any_word(&doc, max, &names).await.map_err(|e| e.into_memory_error(&what))?;
            if let Some(msg) = stderr.strip_prefix('\u{0}') {
                return Err(MemoryError::Internal(format!("{what}: {msg}")));
            }
        }
        // minScore applies to QMD's scores; when no hit reaches it, the hits (all keyword-backed in keyword
        // mode) are returned rather than nothing, as the shared selection does (SPEC 5).
        let min = request.min_score.filter(|m| hits.iter().any(|h| h.score >= *m) || mode != SearchMode::Search);
        let mut results: Vec<SearchResult> = Vec::new();
        let mut budget = inner.cfg.limits.max_injected_chars;
        for hit in &hits {
            if let Some(min) = min {
                if hit.score < min {
                    continue;
                }
            }
            let Some(mut r) = inner.to_result(hit) else {
                warn!(file = %hit.file, "qmd hit in an unknown collection; skipped");
                continue;
            };
            // A file deleted since QMD's last update is never returned.
            if r.source == Source::Memory && !inner.roots.abs_path(&r.path).is_file() {
                continue;
            }
            if results.iter().any(|o| o.path == r.path && o.start_line == r.start_line && o.end_line == r.end_line) {
                continue;
            }
            let n = r.snippet.chars().count();
            if n > budget {
                if budget == 0 || (budget < 80 && !results.is_empty()) {
                    break;
                }
                r.snippet = truncate_chars(&r.snippet, budget);
            }
            budget = budget.saturating_sub(r.snippet.chars().count());
            inner.apply_citation(&mut r);
            results.push(r);
            if results.len() >= max {
                break;
            }
        }
        debug!(query = %query, hits = hits.len(), results = results.len(), elapsed_ms = started.elapsed().as_millis() as u64, "qmd search");
        if inner.on_search_update && inner.sessions.is_some() {
            // Memory files were checked before the search; exported transcripts are only as fresh as the last
            // update: refresh them in the background (debounced, serialised).
            if let Ok(_g) = inner.write_lock.try_lock() {
                drop(_g);
                let i = inner.clone();
                self.spawn(async move {
                    if let Err(e) = i.update(Trigger::Search).await {
                        debug!(error = %e, "qmd update after search failed");
                    }
                });
            }
        }
        Ok(SearchResponse { results, mode: Some(mode.response_mode().into()), warnings })
    }

    async fn get(&self, request: &GetRequest) -> Result<GetResponse> {
        let inner = &self.inner;
        let mut req = request.clone();
        if request.path.trim_start().starts_with("qmd://") {
            if request.path.split('/').any(|seg| seg == "..") {
                return Err(MemoryError::Refused(format!("{}: `..` is not allowed in memory paths", request.path)));
            }
            let abs = inner.resolve_uri(request.path.trim()).ok_or_else(|| {
                MemoryError::NotFound(format!("{}: not a file of a qmd collection of this agent", request.path))
            })?;
            req.path = abs.to_string_lossy().into_owned();
        }
        let roots = inner.roots.clone();
        let max = inner.max_file_bytes;
        tokio::task::spawn_blocking(move || access::read(&roots, &req, max))
            .await
            .map_err(|e| MemoryError::Internal(format!("memory_get: {e}")))?
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
        let st = inner.state.lock().unwrap();
        let cols: Vec<Value> = st
            .registered
            .iter()
            .map(|c| json!({"name": c.name, "path": c.root.to_string_lossy(), "mask": c.mask}))
            .collect();
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
            files: st.last_counts.map(|c| c.files()).unwrap_or(0),
            // QMD's BM25 index ranks whole documents: in keyword mode each file is one searchable unit. Its
            // embedding chunks (vsearch/query) are not counted by any qmd output we read.
            chunks: if inner.mode == SearchMode::Search { st.last_counts.map(|c| c.files()).unwrap_or(0) } else { 0 },
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
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(MemoryError::io_path("cannot remove", &inner.home.join("config/qmd"), e)),
            _ => {}
        }
        write_state(&inner.home, &[])?;
        let mut st = inner.state.lock().unwrap();
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
        let tasks: Vec<_> = self.inner.tasks.lock().unwrap().drain(..).collect();
        for t in tasks {
            t.abort();
            let _ = t.await;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queries_become_one_line() {
        assert_eq!(normalize_query("  lex: a\nvec: b\t c "), "lex: a vec: b c");
        assert_eq!(normalize_query("\n\t"), "");
    }

    #[test]
    fn flag_rejections() {
        assert!(flags_rejected("error: Unknown option '--json'"));
        assert!(!flags_rejected("Collection not found: x"));
    }
}
