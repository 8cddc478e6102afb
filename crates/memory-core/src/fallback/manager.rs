//! The delegation: which engine answers each [`MemoryBackend`] call, the primary or the fallback, and what the
//! caller is told when the fallback answers. The decisions it asks for live in the layers beside it: whether the
//! primary may be called (`health`), how long a call may take (`timeout`), and the engines opened on demand
//! (`open_on_demand`).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use tracing::warn;

use super::health::{self, Health};
use super::open_on_demand::{FactoryOpener, Fallback, FallbackEngine, FallbackOpener, OpenOnDemand};
use super::timeout::bounded;
use super::{falls_back, FallbackPolicy};
use crate::backend::MemoryBackend;
use crate::error::{ErrorKind, MemoryError, Result};
use crate::registry::{BackendFactory, OpenContext};
use crate::types::{
    Capabilities, FallbackStatus, GetRequest, GetResponse, ProgressFn, RecallRequest, RecallResponse, SearchRequest, SearchResponse, Status,
    SyncOptions, SyncReport,
};

/// An answer that can tell the caller it came from the fallback.
trait Warned {
    fn warnings(&mut self) -> &mut Vec<String>;
}

impl Warned for SearchResponse {
    fn warnings(&mut self) -> &mut Vec<String> {
        &mut self.warnings
    }
}

impl Warned for RecallResponse {
    fn warnings(&mut self) -> &mut Vec<String> {
        &mut self.warnings
    }
}

/// A [`MemoryBackend`] that answers from its primary, or from the fallback while the primary fails.
pub struct FallbackManager {
    primary: Box<dyn MemoryBackend>,
    fallback: FallbackEngine,
    policy: FallbackPolicy,
    health: Health,
}

impl FallbackManager {
    pub fn new(primary: Box<dyn MemoryBackend>, fallback: impl Into<Fallback>, policy: FallbackPolicy) -> Self {
        let fallback = FallbackEngine::new(fallback.into());
        let health = Health::new(primary.name(), fallback.name(), &policy);
        FallbackManager { primary, fallback, policy, health }
    }

    /// The usual host setup: the primary opened through its factory (now if it can, else on a later probe, see
    /// [`OpenOnDemand`]), the fallback through its own factory on first need. When the primary cannot open now,
    /// the manager starts in fallback mode, and says so in `status`.
    pub async fn open(
        primary_name: &str,
        primary: Arc<dyn BackendFactory>,
        fallback_name: &str,
        fallback: Arc<dyn BackendFactory>,
        ctx: OpenContext,
        policy: FallbackPolicy,
    ) -> Result<FallbackManager> {
        let p = OpenOnDemand::new(primary_name, primary, ctx.clone());
        // A primary that failed in an earlier run is not opened before its back-off has passed.
        let first =
            if health::failed_before(primary_name, &policy) { Ok(()) } else { bounded(policy.call_timeout, primary_name, p.ensure_open()).await };
        let first_failure = match first {
            Ok(()) => None,
            Err(e) if falls_back(&e) => Some(e),
            Err(e) => return Err(e),
        };
        let opener: Box<dyn FallbackOpener> = Box::new(FactoryOpener::new(fallback_name, fallback, ctx));
        let mgr = FallbackManager::new(Box::new(p), opener, policy);
        if let Some(e) = first_failure {
            mgr.health.record_failure("open", &e);
        }
        Ok(mgr)
    }

    async fn bounded<T>(&self, fut: impl std::future::Future<Output = Result<T>>) -> Result<T> {
        bounded(self.policy.call_timeout, self.primary.name(), fut).await
    }

    /// The primary's answer to `call` (a search or recall), `None` when the fallback is to answer instead: the
    /// primary is failing and not due for a probe, another call is probing it, or it failed now. Its answer ends a
    /// failure; a failure that falls back is recorded; an error about the request itself is the answer.
    async fn ask_primary<T>(&self, op: &str, call: impl std::future::Future<Output = Result<T>>) -> Option<Result<T>> {
        let _probe = self.health.try_primary()?;
        match self.bounded(call).await {
            Ok(r) => {
                self.health.record_success();
                Some(Ok(r))
            }
            Err(e) if !falls_back(&e) => Some(Err(e)),
            Err(e) => {
                self.health.record_failure(op, &e);
                None
            }
        }
    }

    /// A search or recall: the primary's answer when it may be asked ([`Self::ask_primary`]), else the fallback's,
    /// which carries a warning saying why the primary did not answer.
    async fn answer<'a, T: Warned, F>(
        &'a self,
        op: &str,
        primary: impl std::future::Future<Output = Result<T>>,
        fallback: impl FnOnce(&'a dyn MemoryBackend) -> F,
    ) -> Result<T>
    where
        F: std::future::Future<Output = Result<T>>,
    {
        if let Some(answer) = self.ask_primary(op, primary).await {
            return answer;
        }
        let mut resp = self.ask_fallback(fallback).await?;
        resp.warnings().insert(0, self.warning());
        Ok(resp)
    }

    /// The fallback's answer to `call`, the fallback opened first if it is not yet; when it cannot answer either,
    /// an error naming both engines ([`Self::both_failed`]).
    async fn ask_fallback<'a, T, F>(&'a self, call: impl FnOnce(&'a dyn MemoryBackend) -> F) -> Result<T>
    where
        F: std::future::Future<Output = Result<T>>,
    {
        let fb = self.fallback.open().await.map_err(|e| self.both_failed(e))?;
        call(fb).await.map_err(|e| self.both_failed(e))
    }

    /// The primary engine.
    pub fn primary(&self) -> &dyn MemoryBackend {
        self.primary.as_ref()
    }

    /// `Some` while the fallback is answering.
    pub fn fallback_status(&self) -> Option<FallbackStatus> {
        self.health.status()
    }

    /// Time until the primary is probed again (zero when due), `None` when it is healthy.
    pub fn next_probe_in(&self) -> Option<Duration> {
        self.health.failure().map(|f| f.next_probe.saturating_duration_since(Instant::now()))
    }

    /// The current back-off, `None` when the primary is healthy.
    pub fn backoff(&self) -> Option<Duration> {
        self.health.failure().map(|f| f.backoff)
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
            self.health.reason(),
            self.fallback.name()
        ))
    }

    fn warning(&self) -> String {
        format!(
            "memory engine `{}` is unavailable ({}); these results come from the fallback engine `{}`",
            self.primary.name(),
            self.health.reason(),
            self.fallback.name()
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
        if self.health.is_failing() {
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

    /// The primary's journal, else the fallback's when it is open (both watch the same files); never opens one.
    fn watch_changes(&self) -> Option<Box<dyn crate::changes::ChangeStream>> {
        self.primary.watch_changes().or_else(|| self.fallback.get()?.watch_changes())
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
                let engine = self.primary.name();
                warn!(engine, error = %e, "the engine cannot be reached, so its own index was not reset; the fallback's index was");
                Ok(())
            }
            other => other,
        }
    }

    async fn search(&self, request: &SearchRequest) -> Result<SearchResponse> {
        self.answer("search", self.primary.search(request), |fb| fb.search(request)).await
    }

    /// As a search: the primary, else the fallback while it fails. An engine that refuses (it does not read
    /// the annotations) is the answer.
    async fn recall(&self, request: &RecallRequest) -> Result<RecallResponse> {
        self.answer("recall", self.primary.recall(request), |fb| fb.recall(request)).await
    }

    async fn get(&self, request: &GetRequest) -> Result<GetResponse> {
        // memory_get reads the memory files themselves, which engines do without their index or tools, so the
        // primary is asked even during a back-off (it also knows its own path forms, such as `qmd://`). A file
        // read proves nothing about search, so success leaves the health state alone.
        // An I/O error reading one file (permission denied on one note) is that file's answer, not the engine's.
        match self.bounded(self.primary.get(request)).await {
            Ok(r) => return Ok(r),
            Err(e) if !falls_back(&e) || e.kind() == ErrorKind::Io => return Err(e),
            Err(e) => self.health.record_failure("get", &e),
        }
        self.ask_fallback(|fb| fb.get(request)).await
    }

    async fn sync(&self, options: SyncOptions) -> Result<SyncReport> {
        let mut primary_report = None;
        if let Some(_probe) = self.health.try_primary() {
            match self.primary.sync(options).await {
                // An index update that works does not prove that search does: only a search answer clears a
                // failure.
                Ok(r) => primary_report = Some(r),
                Err(e) if !falls_back(&e) => return Err(e),
                Err(e) => self.health.record_failure("sync", &e),
            }
        }
        match primary_report {
            Some(mut report) => {
                // Keep an already-open fallback fresh, so it can answer well when needed.
                if self.policy.sync_fallback {
                    if let Some(fb) = self.fallback.get() {
                        if let Err(e) = fb.sync(options).await {
                            report.warnings.push(format!("fallback engine `{}` sync failed: {e}", self.fallback.name()));
                        }
                    }
                }
                Ok(report)
            }
            None => {
                let mut report = self.ask_fallback(|fb| fb.sync(options)).await?;
                report.warnings.insert(
                    0,
                    format!(
                        "memory engine `{}` is unavailable ({}); synced the fallback engine `{}`",
                        self.primary.name(),
                        self.health.reason(),
                        self.fallback.name()
                    ),
                );
                Ok(report)
            }
        }
    }

    /// The primary's backlog while it answers; none while the fallback answers for it (the backlog's sync would
    /// be the primary's, which is failing).
    async fn vectors_to_catch_up(&self) -> Result<usize> {
        if self.fallback_status().is_some() {
            return Ok(0);
        }
        self.bounded(self.primary.vectors_to_catch_up()).await
    }

    async fn status(&self) -> Result<Status> {
        if !self.health.is_failing() {
            match self.bounded(self.primary.status()).await {
                Ok(s) => return Ok(s),
                Err(e) if !falls_back(&e) => return Err(e),
                Err(e) => self.health.record_failure("status", &e),
            }
        }
        let fallback = self.fallback_status();
        let mut status = match self.fallback.open().await {
            Ok(fb) => match fb.status().await {
                Ok(s) => s,
                Err(e) => Status {
                    backend: self.fallback.name().to_string(),
                    warnings: vec![format!("fallback engine status failed: {e}")],
                    ..Default::default()
                },
            },
            Err(e) => Status {
                backend: self.fallback.name().to_string(),
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
        if let Some(f) = self.health.failure() {
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
