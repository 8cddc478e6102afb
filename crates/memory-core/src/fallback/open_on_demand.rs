//! Engines opened on first use: the primary through its factory (and again after a failed open, so a probe can
//! find it installed), and the fallback when the primary first fails (then synced once so it can answer).

use crate::locks::LockExt;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use tracing::{info, warn};

use crate::backend::MemoryBackend;
use crate::error::{ErrorKind, MemoryError, Result};
use crate::registry::{BackendFactory, OpenContext};
use crate::types::{
    Capabilities, GetRequest, GetResponse, ProgressFn, RecallRequest, RecallResponse, SearchRequest, SearchResponse, Status, SyncOptions, SyncReport,
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
    factory: Arc<dyn BackendFactory>,
    ctx: OpenContext,
}

impl FactoryOpener {
    pub fn new(name: impl Into<String>, factory: Arc<dyn BackendFactory>, ctx: OpenContext) -> Self {
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
/// the [`super::FallbackManager`] answers from the fallback, and each probe after the back-off tries to open it again.
pub struct OpenOnDemand {
    name: String,
    factory: Arc<dyn BackendFactory>,
    ctx: OpenContext,
    engine: tokio::sync::RwLock<Option<Box<dyn MemoryBackend>>>,
    open_lock: tokio::sync::Mutex<()>,
    /// Given to the engine when it opens.
    progress: Mutex<Option<ProgressFn>>,
}

impl OpenOnDemand {
    pub fn new(name: impl Into<String>, factory: Arc<dyn BackendFactory>, ctx: OpenContext) -> Self {
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
        b.set_progress(self.progress.locked().clone());
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
        *self.progress.locked() = f.clone();
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

    async fn vectors_to_catch_up(&self) -> Result<usize> {
        with_engine!(self, e => e.vectors_to_catch_up().await)
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

    /// The engine's journal when it is open (a host that asks before then watches on its own).
    fn watch_changes(&self) -> Option<Box<dyn crate::changes::ChangeStream>> {
        self.engine.try_read().ok()?.as_ref()?.watch_changes()
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

/// The fallback engine as the manager holds it: open from the start, or opened (and synced once) on first need.
pub(super) struct FallbackEngine {
    name: String,
    opener: Option<Box<dyn FallbackOpener>>,
    engine: tokio::sync::OnceCell<Box<dyn MemoryBackend>>,
}

impl FallbackEngine {
    pub fn new(fallback: Fallback) -> FallbackEngine {
        match fallback {
            Fallback::Ready(b) => FallbackEngine { name: b.name().to_string(), opener: None, engine: tokio::sync::OnceCell::new_with(Some(b)) },
            Fallback::Lazy(o) => FallbackEngine { name: o.name().to_string(), opener: Some(o), engine: tokio::sync::OnceCell::new() },
        }
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// The engine if it is open (nothing is opened).
    pub fn get(&self) -> Option<&dyn MemoryBackend> {
        self.engine.get().map(std::convert::AsRef::as_ref)
    }

    /// The engine, opened now if it is not yet (once, however many calls ask at the same time) and synced once:
    /// a fallback opened on a failure has to answer at once, from an index that knows the files.
    pub async fn open(&self) -> Result<&dyn MemoryBackend> {
        let b = self
            .engine
            .get_or_try_init(|| async {
                let opener = self.opener.as_ref().ok_or_else(|| MemoryError::Internal("fallback engine missing".into()))?;
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
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

    use super::super::fakes::{test_ctx, BadConfigFactory, CountingOpener, FakeEngine, FlakyFactory};
    use super::*;

    fn flaky(ok: bool) -> (OpenOnDemand, Arc<AtomicBool>, Arc<AtomicUsize>) {
        let (ok, opens) = (Arc::new(AtomicBool::new(ok)), Arc::new(AtomicUsize::new(0)));
        let factory = Arc::new(FlakyFactory { ok: ok.clone(), opens: opens.clone() });
        (OpenOnDemand::new("qmd", factory, test_ctx()), ok, opens)
    }

    #[tokio::test]
    async fn the_engine_is_opened_by_its_first_call_and_only_once() {
        let (engine, _, opens) = flaky(true);
        assert_eq!(engine.name(), "qmd");
        assert_eq!(engine.capabilities(), Capabilities::default(), "nothing is promised before it opens");
        assert_eq!(opens.load(Ordering::SeqCst), 0, "not opened before it is used");
        for _ in 0..3 {
            assert_eq!(engine.search(&SearchRequest::new("a")).await.unwrap().results[0].path, "qmd.md");
        }
        engine.sync(SyncOptions::default()).await.unwrap();
        assert_eq!(opens.load(Ordering::SeqCst), 1);
        assert!(engine.capabilities().vector, "the open engine's capabilities");
    }

    #[tokio::test]
    async fn a_failed_open_is_unavailable_and_tried_again_by_the_next_call() {
        let (engine, ok, opens) = flaky(false);
        let e = engine.search(&SearchRequest::new("a")).await.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Unavailable);
        assert!(e.to_string().contains("cannot open memory engine `qmd`") && e.to_string().contains("qmd not found"), "{e}");
        ok.store(true, Ordering::SeqCst);
        assert_eq!(engine.search(&SearchRequest::new("a")).await.unwrap().results[0].path, "qmd.md");
        assert_eq!(opens.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn a_wrong_configuration_stays_the_callers_error() {
        let engine = OpenOnDemand::new("qmd", Arc::new(BadConfigFactory), test_ctx());
        assert_eq!(engine.ensure_open().await.unwrap_err().kind(), ErrorKind::InvalidInput);
    }

    #[tokio::test]
    async fn closing_an_engine_never_opened_does_not_open_it() {
        let (engine, _, opens) = flaky(true);
        engine.close().await.unwrap();
        assert_eq!(opens.load(Ordering::SeqCst), 0);
    }

    #[tokio::test]
    async fn a_lazy_fallback_opens_once_for_concurrent_calls_and_syncs_once() {
        let opened = Arc::new(AtomicUsize::new(0));
        let calls = Arc::new(Mutex::new(None));
        let opener: Box<dyn FallbackOpener> = Box::new(CountingOpener { opened: opened.clone(), calls: calls.clone() });
        let fallback = FallbackEngine::new(opener.into());
        assert_eq!(fallback.name(), "builtin");
        assert!(fallback.get().is_none(), "not open before it is needed");
        let (a, b) = tokio::join!(fallback.open(), fallback.open());
        assert_eq!((a.unwrap().name(), b.unwrap().name()), ("builtin", "builtin"));
        assert_eq!(opened.load(Ordering::SeqCst), 1);
        assert_eq!(calls.locked().clone().unwrap().sync.load(Ordering::SeqCst), 1, "synced once on open");
        assert!(fallback.get().is_some());
    }

    #[tokio::test]
    async fn a_ready_fallback_is_open_from_the_start() {
        let (engine, _, calls) = FakeEngine::new("builtin");
        let fallback = FallbackEngine::new(Fallback::from(Box::new(engine) as Box<dyn MemoryBackend>));
        assert_eq!(fallback.get().map(crate::backend::MemoryBackend::name), Some("builtin"));
        fallback.open().await.unwrap();
        assert_eq!(calls.sync.load(Ordering::SeqCst), 0, "a given engine is not synced by the manager");
    }
}
