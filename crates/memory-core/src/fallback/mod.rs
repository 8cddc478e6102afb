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

use std::sync::Mutex;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use tracing::{info, warn};

use crate::backend::MemoryBackend;
use crate::error::{ErrorKind, MemoryError, Result};
use crate::registry::{BackendFactory, OpenContext};
use crate::types::{
    ProgressFn,
    Capabilities, FallbackStatus, GetRequest, GetResponse, SearchRequest, SearchResponse, Status, SyncOptions,
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

    async fn sync(&self, options: SyncOptions) -> Result<SyncReport> {
        with_engine!(self, e => e.sync(options).await)
    }

    async fn status(&self) -> Result<Status> {
        with_engine!(self, e => e.status().await)
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
}

impl Default for FallbackPolicy {
    fn default() -> Self {
        FallbackPolicy {
            initial_backoff: Duration::from_secs(30),
            max_backoff: Duration::from_secs(10 * 60),
            multiplier: 2.0,
            sync_fallback: true,
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
}

impl FallbackManager {
    pub fn new(primary: Box<dyn MemoryBackend>, fallback: impl Into<Fallback>, policy: FallbackPolicy) -> Self {
        let (fallback_name, opener, cell) = match fallback.into() {
            Fallback::Ready(b) => (b.name().to_string(), None, tokio::sync::OnceCell::new_with(Some(b))),
            Fallback::Lazy(o) => (o.name().to_string(), Some(o), tokio::sync::OnceCell::new()),
        };
        FallbackManager { primary, fallback_name, opener, fallback: cell, policy, failure: Mutex::new(None) }
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
        let first = p.ensure_open().await;
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

    fn should_try_primary(&self) -> bool {
        match &*self.failure.lock().unwrap() {
            None => true,
            Some(f) => Instant::now() >= f.next_probe,
        }
    }

    fn record_success(&self) {
        let mut g = self.failure.lock().unwrap();
        if let Some(f) = g.take() {
            info!(
                engine = self.primary.name(),
                failures = f.failures,
                down_ms = crate::now_ms() - f.since_ms,
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

    fn capabilities(&self) -> Capabilities {
        self.primary.capabilities()
    }

    async fn search(&self, request: &SearchRequest) -> Result<SearchResponse> {
        if self.should_try_primary() {
            match self.primary.search(request).await {
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

    async fn get(&self, request: &GetRequest) -> Result<GetResponse> {
        // memory_get reads the memory files themselves, which engines do without their index or tools, so the
        // primary is asked even during a back-off (it also knows its own path forms, such as `qmd://`). A file
        // read proves nothing about search, so success leaves the health state alone.
        match self.primary.get(request).await {
            Ok(r) => return Ok(r),
            Err(e) if !falls_back(&e) => return Err(e),
            Err(e) => self.record_failure("get", &e),
        }
        let fb = self.fallback().await.map_err(|e| self.both_failed(e))?;
        fb.get(request).await.map_err(|e| self.both_failed(e))
    }

    async fn sync(&self, options: SyncOptions) -> Result<SyncReport> {
        let mut primary_report = None;
        if self.should_try_primary() {
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
            match self.primary.status().await {
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
