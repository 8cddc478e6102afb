//! [`FallbackManager`]: wraps a primary engine and answers from a fallback engine (normally builtin) while the
//! primary fails, then returns to the primary once it answers again.
//!
//! - Failures that fall back: the primary is unavailable (missing binary, crash, timeout, failing exit), returns
//!   unparsable output (`Internal`), an unreadable index or an I/O error. A refused path, invalid input or a missing
//!   file are the caller's business and are returned as they are.
//! - While failing, the primary is not called until a back-off has passed (exponential, capped); the next search
//!   (or sync) after that probes it. If a search answers, the manager returns to it; if not, the back-off grows.
//!   `get` reads memory files and always asks the primary first; its success does not change the health state.
//! - Nothing is hidden: search responses answered by the fallback carry a warning, and `status` reports
//!   `fallback: {from, reason, since}`.
//! - The fallback may be given open, or opened lazily on the first failure (then synced once so it can answer).
//! - Once the back-off has passed, exactly one call probes the primary; calls meanwhile are answered by the
//!   fallback at once, so a dead primary is never stampeded. Each primary call is bounded by
//!   [`FallbackPolicy::call_timeout`].
//! - With [`FallbackPolicy::state_file`] the failure survives the process: a one-shot CLI run after a failed one
//!   starts in fallback mode until the back-off has passed, instead of paying the primary's timeout again.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use tracing::{info, warn};

use crate::backend::MemoryBackend;
use crate::error::{ErrorKind, MemoryError, Result};
use crate::registry::{BackendFactory, OpenContext};
use crate::types::{
    ProgressFn,
    Capabilities, FallbackStatus, GetRequest, GetResponse, RecallRequest, RecallResponse, SearchRequest, SearchResponse, Status, SyncOptions,
    SyncReport,
};

/// Opens the fallback engine when it is first needed.
#[async_trait]
pub trait FallbackOpener: Send + Sync {
    /// The name of the engine it opens (for messages before it is open).
    fn name(&self) -> &str;
    async fn open(&self) -> Result<Box<dyn MemoryBackend>>;
}

/// Opens an engine through its factory (e.g. `BuiltinFactory`) with a given context.
pub struct FactoryOpener {
    name: String,
    factory: std::sync::Arc<dyn BackendFactory>,
    ctx: OpenContext,
}

impl FactoryOpener {
    pub fn new(name: impl Into<String>, factory: std::sync::Arc<dyn BackendFactory>, ctx: OpenContext) -> Self {
        FactoryOpener { name: name.into(), factory, ctx }
    }
}

#[async_trait]
impl FallbackOpener for FactoryOpener {
    fn name(&self) -> &str {
        &self.name
    }

    async fn open(&self) -> Result<Box<dyn MemoryBackend>> {
        self.factory.open(self.ctx.clone()).await
    }
}

/// A primary engine opened through its factory on first use, and again after a failed open. Lets a host start
/// with a primary that cannot open yet (qmd not installed, boot update failing): calls fail with the open error,
/// the [`FallbackManager`] answers from the fallback, and each probe after the back-off tries to open it again.
pub struct OpenOnDemand {
    name: String,
    factory: std::sync::Arc<dyn BackendFactory>,
    ctx: OpenContext,
    engine: tokio::sync::RwLock<Option<Box<dyn MemoryBackend>>>,
    open_lock: tokio::sync::Mutex<()>,
    /// Given to the engine when it opens.
    progress: Mutex<Option<ProgressFn>>,
}

impl OpenOnDemand {
    pub fn new(name: impl Into<String>, factory: std::sync::Arc<dyn BackendFactory>, ctx: OpenContext) -> Self {
        OpenOnDemand {
            name: name.into(),
            factory,
            ctx,
            engine: tokio::sync::RwLock::new(None),
            open_lock: tokio::sync::Mutex::new(()),
            progress: Mutex::new(None),
        }
    }

    /// Open now (if not open yet); the error is the engine's open error.
    pub async fn ensure_open(&self) -> Result<()> {
        if self.engine.read().await.is_some() {
            return Ok(());
        }
        let _g = self.open_lock.lock().await;
        if self.engine.read().await.is_some() {
            return Ok(());
        }
        let b = self.factory.open(self.ctx.clone()).await.map_err(|e| match e.kind() {
            // A wrong configuration stays the caller's business; anything else is "cannot open now".
            ErrorKind::InvalidInput => e,
            _ => MemoryError::Unavailable(format!("cannot open memory engine `{}`: {e}", self.name)),
        })?;
        info!(engine = %self.name, "memory engine opened");
        b.set_progress(self.progress.lock().unwrap().clone());
        *self.engine.write().await = Some(b);
        Ok(())
    }
}

macro_rules! with_engine {
    ($self:ident, $e:ident => $body:expr) => {{
        $self.ensure_open().await?;
        let guard = $self.engine.read().await;
        let $e = guard.as_ref().expect("opened above");
        $body
    }};
}

#[async_trait]
impl MemoryBackend for OpenOnDemand {
    fn name(&self) -> &str {
        &self.name
    }

    fn set_progress(&self, f: Option<ProgressFn>) {
        *self.progress.lock().unwrap() = f.clone();
        if let Ok(g) = self.engine.try_read() {
            if let Some(e) = g.as_ref() {
                e.set_progress(f);
            }
        }
    }

    fn capabilities(&self) -> Capabilities {
        match self.engine.try_read() {
            Ok(g) => g.as_ref().map(|e| e.capabilities()).unwrap_or_default(),
            Err(_) => Capabilities::default(),
        }
    }

    async fn search(&self, request: &SearchRequest) -> Result<SearchResponse> {
        with_engine!(self, e => e.search(request).await)
    }

    async fn get(&self, request: &GetRequest) -> Result<GetResponse> {
        with_engine!(self, e => e.get(request).await)
    }

    async fn recall(&self, request: &RecallRequest) -> Result<RecallResponse> {
        with_engine!(self, e => e.recall(request).await)
    }

    async fn sync(&self, options: SyncOptions) -> Result<SyncReport> {
        with_engine!(self, e => e.sync(options).await)
    }

    async fn status(&self) -> Result<Status> {
        with_engine!(self, e => e.status().await)
    }

    async fn verify(&self) -> Result<Option<String>> {
        with_engine!(self, e => e.verify().await)
    }

    async fn reset(&self) -> Result<()> {
        with_engine!(self, e => e.reset().await)
    }

    fn notify_changed(&self, paths: &[PathBuf]) {
        if let Ok(g) = self.engine.try_read() {
            if let Some(e) = g.as_ref() {
                e.notify_changed(paths);
            }
        }
    }

    async fn close(&self) -> Result<()> {
        match self.engine.write().await.take() {
            Some(e) => e.close().await,
            None => Ok(()),
        }
    }
}

/// The fallback engine: already open, or opened on first need.
pub enum Fallback {
    Ready(Box<dyn MemoryBackend>),
    Lazy(Box<dyn FallbackOpener>),
}

impl From<Box<dyn MemoryBackend>> for Fallback {
    fn from(b: Box<dyn MemoryBackend>) -> Self {
        Fallback::Ready(b)
    }
}

impl From<Box<dyn FallbackOpener>> for Fallback {
    fn from(o: Box<dyn FallbackOpener>) -> Self {
        Fallback::Lazy(o)
    }
}

/// When to probe a failing primary again.
#[derive(Debug, Clone)]
pub struct FallbackPolicy {
    /// Wait after the first failure before probing the primary again.
    pub initial_backoff: Duration,
    /// The wait never grows beyond this.
    pub max_backoff: Duration,
    /// Each failed probe multiplies the wait by this.
    pub multiplier: f64,
    /// Keep an open fallback's index fresh on `sync` even while the primary works.
    pub sync_fallback: bool,
    /// A primary search, get or status that takes longer than this counts as a failure and is answered by the
    /// fallback (syncs are not bounded: a first index may take long). `None`: no bound.
    pub call_timeout: Option<Duration>,
    /// Where the failure state is kept between processes (`None`: in memory only).
    pub state_file: Option<PathBuf>,
}

impl Default for FallbackPolicy {
    fn default() -> Self {
        FallbackPolicy {
            initial_backoff: Duration::from_secs(30),
            max_backoff: Duration::from_secs(10 * 60),
            multiplier: 2.0,
            sync_fallback: true,
            call_timeout: Some(Duration::from_secs(10)),
            state_file: None,
        }
    }
}

impl FallbackPolicy {
    fn next(&self, current: Option<Duration>) -> Duration {
        let d = match current {
            None => self.initial_backoff,
            Some(d) => d.mul_f64(self.multiplier.max(1.0)),
        };
        d.min(self.max_backoff)
    }
}

#[derive(Debug, Clone)]
struct Failure {
    reason: String,
    kind: ErrorKind,
    since_ms: i64,
    failures: u32,
    backoff: Duration,
    next_probe: Instant,
}

/// [`Failure`] as kept in the state file (instants as Unix milliseconds).
#[derive(serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct SavedFailure {
    engine: String,
    reason: String,
    kind: ErrorKind,
    since_ms: i64,
    failures: u32,
    backoff_ms: u64,
    next_probe_ms: i64,
}

impl Failure {
    fn save(&self, engine: &str, path: &std::path::Path) {
        let wait = self.next_probe.saturating_duration_since(Instant::now());
        let saved = SavedFailure {
            engine: engine.to_string(),
            reason: self.reason.clone(),
            kind: self.kind,
            since_ms: self.since_ms,
            failures: self.failures,
            backoff_ms: self.backoff.as_millis() as u64,
            next_probe_ms: crate::now_ms() + wait.as_millis() as i64,
        };
        let write = || -> std::io::Result<()> {
            if let Some(dir) = path.parent() {
                std::fs::create_dir_all(dir)?;
            }
            let tmp = path.with_extension("tmp");
            std::fs::write(&tmp, serde_json::to_vec(&saved).unwrap_or_default())?;
            std::fs::rename(&tmp, path)
        };
        if let Err(e) = write() {
            warn!(path = %path.display(), error = %e, "cannot save the engine's failure state");
        }
    }

    /// The saved failure of `engine`, if its file is readable and names it.
    fn load(engine: &str, path: &std::path::Path, max_backoff: Duration) -> Option<Failure> {
        let saved: SavedFailure = serde_json::from_slice(&std::fs::read(path).ok()?).ok()?;
        if saved.engine != engine {
            return None;
        }
        let wait = Duration::from_millis(saved.next_probe_ms.saturating_sub(crate::now_ms()).max(0) as u64);
        Some(Failure {
            reason: saved.reason,
            kind: saved.kind,
            since_ms: saved.since_ms,
            failures: saved.failures,
            backoff: Duration::from_millis(saved.backoff_ms),
            // A clock moved backwards must not postpone the probe beyond one back-off, nor beyond this policy's.
            next_probe: Instant::now() + wait.min(Duration::from_millis(saved.backoff_ms)).min(max_backoff),
        })
    }
}

/// `fut` bounded by a per-call timeout (a timeout is an `Unavailable` failure).
async fn bounded<T>(limit: Option<Duration>, engine: &str, fut: impl std::future::Future<Output = Result<T>>) -> Result<T> {
    match limit {
        Some(limit) => tokio::time::timeout(limit, fut)
            .await
            .unwrap_or_else(|_| Err(MemoryError::Unavailable(format!("memory engine `{engine}` did not answer within {limit:?}")))),
        None => fut.await,
    }
}

/// True for errors that mean "this engine cannot answer now", as opposed to "this request is wrong".
pub fn falls_back(e: &MemoryError) -> bool {
    matches!(e.kind(), ErrorKind::Unavailable | ErrorKind::Internal | ErrorKind::CorruptIndex | ErrorKind::Io)
}

/// A [`MemoryBackend`] that answers from its primary, or from the fallback while the primary fails.
pub struct FallbackManager {
    primary: Box<dyn MemoryBackend>,
    fallback_name: String,
    opener: Option<Box<dyn FallbackOpener>>,
    fallback: tokio::sync::OnceCell<Box<dyn MemoryBackend>>,
    policy: FallbackPolicy,
    failure: Mutex<Option<Failure>>,
    /// A call is probing the failing primary: the others go to the fallback meanwhile.
    probing: AtomicBool,
}

/// Ends a probe when dropped (whatever the probe's outcome, also when its future is dropped).
struct ProbeGuard<'a>(Option<&'a AtomicBool>);

impl Drop for ProbeGuard<'_> {
    fn drop(&mut self) {
        if let Some(flag) = self.0 {
            flag.store(false, Ordering::SeqCst);
        }
    }
}

impl FallbackManager {
    pub fn new(primary: Box<dyn MemoryBackend>, fallback: impl Into<Fallback>, policy: FallbackPolicy) -> Self {
        let (fallback_name, opener, cell) = match fallback.into() {
            Fallback::Ready(b) => (b.name().to_string(), None, tokio::sync::OnceCell::new_with(Some(b))),
            Fallback::Lazy(o) => (o.name().to_string(), Some(o), tokio::sync::OnceCell::new()),
        };
        let failure = policy.state_file.as_deref().and_then(|p| Failure::load(primary.name(), p, policy.max_backoff));
        if let Some(f) = &failure {
            info!(engine = primary.name(), reason = %f.reason, "memory engine failed in an earlier run; answering from the fallback until its back-off has passed");
        }
        FallbackManager { primary, fallback_name, opener, fallback: cell, policy, failure: Mutex::new(failure), probing: AtomicBool::new(false) }
    }

    /// The usual host setup: the primary opened through its factory (now if it can, else on a later probe, see
    /// [`OpenOnDemand`]), the fallback through its own factory on first need. When the primary cannot open now,
    /// the manager starts in fallback mode, and says so in `status`.
    pub async fn open(
        primary_name: &str,
        primary: std::sync::Arc<dyn BackendFactory>,
        fallback_name: &str,
        fallback: std::sync::Arc<dyn BackendFactory>,
        ctx: OpenContext,
        policy: FallbackPolicy,
    ) -> Result<FallbackManager> {
        let p = OpenOnDemand::new(primary_name, primary, ctx.clone());
        // A primary that failed in an earlier run is not opened before its back-off has passed.
        let failed_before = policy.state_file.as_deref().is_some_and(|f| Failure::load(primary_name, f, policy.max_backoff).is_some());
        let first = if failed_before { Ok(()) } else { bounded(policy.call_timeout, primary_name, p.ensure_open()).await };
        if let Err(e) = &first {
            if !falls_back(e) {
                return Err(first.unwrap_err());
            }
        }
        let opener: Box<dyn FallbackOpener> = Box::new(FactoryOpener::new(fallback_name, fallback, ctx));
        let mgr = FallbackManager::new(Box::new(p), opener, policy);
        if let Err(e) = first {
            mgr.record_failure("open", &e);
        }
        Ok(mgr)
    }

    async fn bounded<T>(&self, fut: impl std::future::Future<Output = Result<T>>) -> Result<T> {
        bounded(self.policy.call_timeout, self.primary.name(), fut).await
    }

    /// The primary engine.
    pub fn primary(&self) -> &dyn MemoryBackend {
        self.primary.as_ref()
    }

    /// `Some` while the fallback is answering.
    pub fn fallback_status(&self) -> Option<FallbackStatus> {
        self.failure.lock().unwrap().as_ref().map(|f| FallbackStatus {
            from: self.primary.name().to_string(),
            reason: f.reason.clone(),
            since: Some(f.since_ms),
        })
    }

    /// Time until the primary is probed again (zero when due), `None` when it is healthy.
    pub fn next_probe_in(&self) -> Option<Duration> {
        self.failure.lock().unwrap().as_ref().map(|f| f.next_probe.saturating_duration_since(Instant::now()))
    }

    /// The current back-off, `None` when the primary is healthy.
    pub fn backoff(&self) -> Option<Duration> {
        self.failure.lock().unwrap().as_ref().map(|f| f.backoff)
    }

    /// `Some` when this call may use the primary: it is healthy, or its back-off has passed and no other call is
    /// probing it (this call is then the probe until the guard drops).
    fn try_primary(&self) -> Option<ProbeGuard<'_>> {
        match &*self.failure.lock().unwrap() {
            None => Some(ProbeGuard(None)),
            Some(f) if Instant::now() >= f.next_probe => {
                self.probing.compare_exchange(false, true, Ordering::SeqCst, Ordering::SeqCst).ok().map(|_| ProbeGuard(Some(&self.probing)))
            }
            Some(_) => None,
        }
    }

    fn record_success(&self) {
        let mut g = self.failure.lock().unwrap();
        if let Some(f) = g.take() {
            if let Some(path) = &self.policy.state_file {
                let _ = std::fs::remove_file(path);
            }
            info!(
                engine = self.primary.name(),
                failures = f.failures,
                down_ms = crate::now_ms().saturating_sub(f.since_ms),
                "memory engine recovered; leaving the fallback"
            );
        }
    }

    fn record_failure(&self, op: &str, e: &MemoryError) {
        let mut g = self.failure.lock().unwrap();
        let reason = format!("{op}: {e}");
        let now = Instant::now();
        match g.as_mut() {
            Some(f) => {
                f.backoff = self.policy.next(Some(f.backoff));
                f.next_probe = now + f.backoff;
                f.failures += 1;
                f.reason = reason;
                f.kind = e.kind();
                warn!(engine = self.primary.name(), error = %e, backoff_ms = f.backoff.as_millis() as u64, "memory engine still failing");
            }
            None => {
                let backoff = self.policy.next(None);
                warn!(
                    engine = self.primary.name(),
                    fallback = %self.fallback_name,
                    error = %e,
                    backoff_ms = backoff.as_millis() as u64,
                    "memory engine failed; answering from the fallback"
                );
                *g = Some(Failure {
                    reason,
                    kind: e.kind(),
                    since_ms: crate::now_ms(),
                    failures: 1,
                    backoff,
                    next_probe: now + backoff,
                });
            }
        }
        if let (Some(f), Some(path)) = (g.as_ref(), &self.policy.state_file) {
            f.save(self.primary.name(), path);
        }
    }

    fn reason(&self) -> String {
        self.failure.lock().unwrap().as_ref().map(|f| f.reason.clone()).unwrap_or_else(|| "unknown".into())
    }

    /// The fallback engine, opened (and synced once) on first need.
    async fn fallback(&self) -> Result<&dyn MemoryBackend> {
        let b = self
            .fallback
            .get_or_try_init(|| async {
                let opener = self
                    .opener
                    .as_ref()
                    .ok_or_else(|| MemoryError::Internal("fallback engine missing".into()))?;
                info!(fallback = opener.name(), "opening the fallback memory engine");
                let b = opener.open().await?;
                if let Err(e) = b.sync(SyncOptions::default()).await {
                    warn!(fallback = opener.name(), error = %e, "first sync of the fallback engine failed");
                }
                Ok::<_, MemoryError>(b)
            })
            .await?;
        Ok(b.as_ref())
    }

    fn both_failed(&self, e: MemoryError) -> MemoryError {
        // The fallback's answer about the request itself (a refused path, an empty query) is the answer: keep its
        // kind so the caller fixes the request instead of retrying.
        if !falls_back(&e) {
            return e;
        }
        MemoryError::Unavailable(format!(
            "memory engine `{}` failed ({}) and the fallback `{}` failed too: {e}",
            self.primary.name(),
            self.reason(),
            self.fallback_name
        ))
    }

    fn warning(&self) -> String {
        format!(
            "memory engine `{}` is unavailable ({}); these results come from the fallback engine `{}`",
            self.primary.name(),
            self.reason(),
            self.fallback_name
        )
    }
}

#[async_trait]
impl MemoryBackend for FallbackManager {
    fn name(&self) -> &str {
        self.primary.name()
    }

    /// Progress of the primary's syncs (the fallback's are short catch-ups, started on first need).
    fn set_progress(&self, f: Option<ProgressFn>) {
        self.primary.set_progress(f);
    }

    /// The fallback's while it answers (an agent must not be told of vector search a keyword fallback lacks).
    fn capabilities(&self) -> Capabilities {
        if self.failure.lock().unwrap().is_some() {
            if let Some(fb) = self.fallback.get() {
                return fb.capabilities();
            }
        }
        self.primary.capabilities()
    }

    fn notify_changed(&self, paths: &[PathBuf]) {
        self.primary.notify_changed(paths);
        if let Some(fb) = self.fallback.get() {
            fb.notify_changed(paths);
        }
    }

    /// Resets the primary's index and the fallback's (when open): both are derived from the same files. While the
    /// primary cannot be reached, resetting the fallback's index is enough to succeed (with a warning).
    async fn reset(&self) -> Result<()> {
        let primary = self.bounded(self.primary.reset()).await;
        if let Some(fb) = self.fallback.get() {
            fb.reset().await?;
        }
        match primary {
            // The engine cannot be reached (that is why the fallback answers): the index that answers is reset,
            // and the engine's own is left for it to rebuild, which the warning says.
            Err(e) if falls_back(&e) && self.fallback.get().is_some() => {
                warn!(engine = self.primary.name(), error = %e, "the engine cannot be reached, so its own index was not reset; the fallback's index was");
                Ok(())
            }
            other => other,
        }
    }

    async fn search(&self, request: &SearchRequest) -> Result<SearchResponse> {
        if let Some(_probe) = self.try_primary() {
            match self.bounded(self.primary.search(request)).await {
                Ok(r) => {
                    self.record_success();
                    return Ok(r);
                }
                Err(e) if !falls_back(&e) => return Err(e),
                Err(e) => self.record_failure("search", &e),
            }
        }
        let fb = self.fallback().await.map_err(|e| self.both_failed(e))?;
        let mut resp = fb.search(request).await.map_err(|e| self.both_failed(e))?;
        resp.warnings.insert(0, self.warning());
        Ok(resp)
    }

    /// As a search: the primary, else the fallback while it fails. An engine that refuses (it does not read
    /// the annotations) is the answer.
    async fn recall(&self, request: &RecallRequest) -> Result<RecallResponse> {
        if let Some(_probe) = self.try_primary() {
            match self.bounded(self.primary.recall(request)).await {
                Ok(r) => {
                    self.record_success();
                    return Ok(r);
                }
                Err(e) if !falls_back(&e) => return Err(e),
                Err(e) => self.record_failure("recall", &e),
            }
        }
        let fb = self.fallback().await.map_err(|e| self.both_failed(e))?;
        let mut resp = fb.recall(request).await.map_err(|e| self.both_failed(e))?;
        resp.warnings.insert(0, self.warning());
        Ok(resp)
    }

    async fn get(&self, request: &GetRequest) -> Result<GetResponse> {
        // memory_get reads the memory files themselves, which engines do without their index or tools, so the
        // primary is asked even during a back-off (it also knows its own path forms, such as `qmd://`). A file
        // read proves nothing about search, so success leaves the health state alone.
        // An I/O error reading one file (permission denied on one note) is that file's answer, not the engine's.
        match self.bounded(self.primary.get(request)).await {
            Ok(r) => return Ok(r),
            Err(e) if !falls_back(&e) || e.kind() == ErrorKind::Io => return Err(e),
            Err(e) => self.record_failure("get", &e),
        }
        let fb = self.fallback().await.map_err(|e| self.both_failed(e))?;
        fb.get(request).await.map_err(|e| self.both_failed(e))
    }

    async fn sync(&self, options: SyncOptions) -> Result<SyncReport> {
        let mut primary_report = None;
        if let Some(_probe) = self.try_primary() {
            match self.primary.sync(options).await {
                // An index update that works does not prove that search does: only a search answer clears a
                // failure.
                Ok(r) => primary_report = Some(r),
                Err(e) if !falls_back(&e) => return Err(e),
                Err(e) => self.record_failure("sync", &e),
            }
        }
        match primary_report {
            Some(mut report) => {
                // Keep an already-open fallback fresh, so it can answer well when needed.
                if self.policy.sync_fallback {
                    if let Some(fb) = self.fallback.get() {
                        if let Err(e) = fb.sync(options).await {
                            report.warnings.push(format!("fallback engine `{}` sync failed: {e}", self.fallback_name));
                        }
                    }
                }
                Ok(report)
            }
            None => {
                let fb = self.fallback().await.map_err(|e| self.both_failed(e))?;
                let mut report = fb.sync(options).await.map_err(|e| self.both_failed(e))?;
                report.warnings.insert(
                    0,
                    format!(
                        "memory engine `{}` is unavailable ({}); synced the fallback engine `{}`",
                        self.primary.name(),
                        self.reason(),
                        self.fallback_name
                    ),
                );
                Ok(report)
            }
        }
    }

    async fn status(&self) -> Result<Status> {
        if self.failure.lock().unwrap().is_none() {
            match self.bounded(self.primary.status()).await {
                Ok(s) => return Ok(s),
                Err(e) if !falls_back(&e) => return Err(e),
                Err(e) => self.record_failure("status", &e),
            }
        }
        let fallback = self.fallback_status();
        let mut status = match self.fallback().await {
            Ok(fb) => match fb.status().await {
                Ok(s) => s,
                Err(e) => Status {
                    backend: self.fallback_name.clone(),
                    warnings: vec![format!("fallback engine status failed: {e}")],
                    ..Default::default()
                },
            },
            Err(e) => Status {
                backend: self.fallback_name.clone(),
                warnings: vec![format!("fallback engine cannot open: {e}")],
                ..Default::default()
            },
        };
        if let Some(f) = &fallback {
            status.warnings.insert(0, format!("memory engine `{}` is unavailable: {}", f.from, f.reason));
        }
        if let Some(next) = self.next_probe_in() {
            status.extra.insert("nextProbeMs".into(), serde_json::json!(next.as_millis() as u64));
        }
        if let Some(f) = self.failure.lock().unwrap().as_ref() {
            status.extra.insert("primaryFailures".into(), serde_json::json!(f.failures));
            status.extra.insert("primaryErrorKind".into(), serde_json::json!(f.kind));
        }
        status.fallback = fallback;
        Ok(status)
    }

    async fn close(&self) -> Result<()> {
        let p = self.primary.close().await;
        if let Some(fb) = self.fallback.get() {
            fb.close().await?;
        }
        p
    }
}

#[cfg(test)]
mod tests;
