//! Small engines, openers and factories whose failures the tests switch on and off.

use crate::locks::LockExt;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;

use super::FallbackOpener;
use crate::backend::MemoryBackend;
use crate::error::{MemoryError, Result};
use crate::registry::{BackendFactory, OpenContext};
use crate::types::{Capabilities, GetRequest, GetResponse, SearchRequest, SearchResponse, SearchResult, Source, Status, SyncOptions, SyncReport};

#[derive(Debug, Clone)]
pub enum Mode {
    Ok,
    Fail(fn(String) -> MemoryError),
    Hang(Duration),
}

#[derive(Default)]
pub struct Counters {
    pub search: AtomicUsize,
    pub get: AtomicUsize,
    pub sync: AtomicUsize,
    pub closed: AtomicUsize,
    pub reset: AtomicUsize,
}

pub struct FakeEngine {
    pub name: &'static str,
    pub mode: Arc<Mutex<Mode>>,
    pub calls: Arc<Counters>,
}

impl FakeEngine {
    pub fn new(name: &'static str) -> (Self, Arc<Mutex<Mode>>, Arc<Counters>) {
        let mode = Arc::new(Mutex::new(Mode::Ok));
        let calls = Arc::new(Counters::default());
        (FakeEngine { name, mode: mode.clone(), calls: calls.clone() }, mode, calls)
    }

    async fn behave(&self) -> Result<()> {
        let mode = self.mode.locked().clone();
        match mode {
            Mode::Ok => Ok(()),
            Mode::Fail(f) => Err(f(format!("{} is broken", self.name))),
            Mode::Hang(d) => {
                tokio::time::sleep(d).await;
                Err(MemoryError::Unavailable(format!("{} timed out", self.name)))
            }
        }
    }
}

#[async_trait]
impl MemoryBackend for FakeEngine {
    fn name(&self) -> &str {
        self.name
    }
    fn capabilities(&self) -> Capabilities {
        // The primary in these tests has vectors, the fallback has not: capabilities tell who answers.
        Capabilities { keyword: true, vector: self.name != "builtin", ..Default::default() }
    }
    async fn reset(&self) -> Result<()> {
        self.calls.reset.fetch_add(1, Ordering::SeqCst);
        self.behave().await
    }
    async fn search(&self, request: &SearchRequest) -> Result<SearchResponse> {
        self.calls.search.fetch_add(1, Ordering::SeqCst);
        self.behave().await?;
        Ok(SearchResponse {
            results: vec![SearchResult::new(Source::Memory, format!("{}.md", self.name), 1, 1, 1.0, request.query.clone())],
            mode: Some("keyword".into()),
            warnings: vec![],
            explanation: None,
        })
    }
    async fn get(&self, request: &GetRequest) -> Result<GetResponse> {
        self.calls.get.fetch_add(1, Ordering::SeqCst);
        self.behave().await?;
        Ok(GetResponse { path: request.path.clone(), text: self.name.to_string(), from: 1, lines: 1, total_lines: 1, ..Default::default() })
    }
    async fn sync(&self, _options: SyncOptions) -> Result<SyncReport> {
        self.calls.sync.fetch_add(1, Ordering::SeqCst);
        self.behave().await?;
        Ok(SyncReport { files_scanned: 1, ..Default::default() })
    }
    async fn status(&self) -> Result<Status> {
        self.behave().await?;
        Ok(Status { backend: self.name.into(), ..Default::default() })
    }
    async fn close(&self) -> Result<()> {
        self.calls.closed.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }
}

pub fn unavailable(m: String) -> MemoryError {
    MemoryError::Unavailable(m)
}
pub fn internal(m: String) -> MemoryError {
    MemoryError::Internal(format!("unparsable output: {m}"))
}
pub fn refused(m: String) -> MemoryError {
    MemoryError::Refused(m)
}
pub fn invalid(m: String) -> MemoryError {
    MemoryError::InvalidInput(m)
}

pub struct CountingOpener {
    pub opened: Arc<AtomicUsize>,
    pub calls: Arc<Mutex<Option<Arc<Counters>>>>,
}

#[async_trait]
impl FallbackOpener for CountingOpener {
    fn name(&self) -> &str {
        "builtin"
    }
    async fn open(&self) -> Result<Box<dyn MemoryBackend>> {
        self.opened.fetch_add(1, Ordering::SeqCst);
        let (engine, _, calls) = FakeEngine::new("builtin");
        *self.calls.locked() = Some(calls);
        Ok(Box::new(engine))
    }
}

/// A factory whose engine opens only once `ok` is set.
pub struct FlakyFactory {
    pub ok: Arc<std::sync::atomic::AtomicBool>,
    pub opens: Arc<AtomicUsize>,
}

#[async_trait]
impl BackendFactory for FlakyFactory {
    async fn open(&self, _ctx: OpenContext) -> Result<Box<dyn MemoryBackend>> {
        self.opens.fetch_add(1, Ordering::SeqCst);
        if self.ok.load(Ordering::SeqCst) {
            Ok(Box::new(FakeEngine::new("qmd").0))
        } else {
            Err(MemoryError::Unavailable("qmd not found: set memory.qmd.command".into()))
        }
    }
}

pub struct FakeBuiltinFactory;

#[async_trait]
impl BackendFactory for FakeBuiltinFactory {
    async fn open(&self, _ctx: OpenContext) -> Result<Box<dyn MemoryBackend>> {
        Ok(Box::new(FakeEngine::new("builtin").0))
    }
}

pub fn test_ctx() -> OpenContext {
    OpenContext::new(Arc::new(crate::config::Config::default()), std::env::temp_dir(), std::env::temp_dir(), "main")
}

/// A factory whose engine cannot open: its configuration is wrong (the caller's business, never a fallback).
pub struct BadConfigFactory;

#[async_trait]
impl BackendFactory for BadConfigFactory {
    async fn open(&self, _ctx: OpenContext) -> Result<Box<dyn MemoryBackend>> {
        Err(MemoryError::config("memory.qmd.searchMode", "`fast` is not one of search, vsearch, query"))
    }
}
