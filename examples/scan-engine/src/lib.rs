//! An example memory engine built on `memory-rs-contract` alone: it keeps no index and reads the memory files
//! at every search, so it is always fresh and has nothing to rebuild. Fine for a few hundred notes; an engine
//! for more keeps an index (memory-rs-core's `IndexedBackend` gives one to any store).
//!
//! What it shows a plugin author: a [`BackendFactory`] opening the engine from an [`OpenContext`], a
//! [`MemoryBackend`] answering every request (or saying why not), honest [`Capabilities`] (keyword search only),
//! config keys it does not act on reported as warnings, and the conformance suite run against it
//! (`tests/conformance.rs`).
//!
//! ```no_run
//! # async fn demo(ctx: memory_contract::registry::OpenContext) -> memory_contract::Result<()> {
//! use memory_contract::registry::BackendRegistry;
//! let mut registry = BackendRegistry::new();
//! registry.register("scan", std::sync::Arc::new(scan_engine::ScanFactory));
//! let engine = registry.open(ctx).await?; // with `memory.backend = "scan"` in the config
//! # Ok(()) }
//! ```

#![cfg_attr(not(test), deny(clippy::unwrap_used))]

mod files;
mod rank;
mod words;

use std::path::PathBuf;
use std::sync::Arc;

use async_trait::async_trait;
use memory_contract::citation::cite;
use memory_contract::config::{Config, ConfigIssue};
use memory_contract::registry::{BackendFactory, OpenContext};
use memory_contract::{
    Capabilities, GetRequest, GetResponse, MemoryBackend, MemoryError, Result, SearchRequest, SearchResponse, Source, Status, SyncOptions, SyncReport,
};

/// The name the engine registers under (`memory.backend = "scan"`).
pub const NAME: &str = "scan";

/// Opens [`ScanEngine`]s.
pub struct ScanFactory;

#[async_trait]
impl BackendFactory for ScanFactory {
    async fn open(&self, ctx: OpenContext) -> Result<Box<dyn MemoryBackend>> {
        Ok(Box::new(ScanEngine { workspace: ctx.workspace().to_path_buf(), config: ctx.config.clone() }))
    }

    fn config_warnings(&self, config: &Config) -> Vec<ConfigIssue> {
        let search = &config.memory.search;
        let mut out = Vec::new();
        if !search.extra_paths.is_empty() {
            out.push(ConfigIssue {
                key: "memory.search.extraPaths".into(),
                message: "accepted, not used: the scan engine reads MEMORY.md, USER.md and memory/ only".into(),
            });
        }
        if search.sources.contains(&Source::Sessions) {
            out.push(ConfigIssue {
                key: "memory.search.sources".into(),
                message: "accepted, not used: the scan engine does not read session transcripts".into(),
            });
        }
        out
    }
}

/// Keyword search over the memory files as they are on disk at the moment of the search.
pub struct ScanEngine {
    workspace: PathBuf,
    config: Arc<Config>,
}

#[async_trait]
impl MemoryBackend for ScanEngine {
    fn name(&self) -> &str {
        NAME
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities { keyword: true, cjk: true, ..Capabilities::default() }
    }

    async fn search(&self, request: &SearchRequest) -> Result<SearchResponse> {
        if request.query.trim().is_empty() {
            return Err(MemoryError::InvalidInput("query: empty".into()));
        }
        let days = request.days()?;
        let mut warnings = Vec::new();
        if !request.active_project_keys.is_empty() {
            warnings.push("activeProjectKeys: the scan engine does not rank by project; ignored".to_string());
        }
        if request.explain || request.explain_path.is_some() {
            warnings.push("explain: the scan engine cannot explain its ranking".to_string());
        }
        let query = &self.config.memory.search.query;
        let max_results = request.max_results.unwrap_or(query.max_results);
        let min_score = request.min_score.unwrap_or(query.min_score);
        let mut results = if request.sources.is_empty() || request.sources.contains(&Source::Memory) {
            let chunks = rank::chunks_of(&files::memory_files(&self.workspace), days);
            rank::search(&chunks, &request.query, max_results, min_score)
        } else {
            Vec::new()
        };
        for r in &mut results {
            cite(r, self.config.memory.citations);
        }
        Ok(SearchResponse { results, mode: Some("keyword".into()), warnings, explanation: None })
    }

    async fn get(&self, request: &GetRequest) -> Result<GetResponse> {
        files::get(&self.workspace, request)
    }

    async fn sync(&self, _options: SyncOptions) -> Result<SyncReport> {
        // Nothing to bring in step: every search reads the files. The report counts what a search would read.
        let n = files::memory_files(&self.workspace).len();
        Ok(SyncReport { files_scanned: n, files_unchanged: n, ..SyncReport::default() })
    }

    async fn status(&self) -> Result<Status> {
        let files = files::memory_files(&self.workspace);
        let chunks = rank::chunks_of(&files, None).len();
        Ok(Status {
            backend: NAME.into(),
            workspace: self.workspace.display().to_string(),
            files: files.len(),
            chunks,
            capabilities: self.capabilities(),
            ..Status::default()
        })
    }

    async fn close(&self) -> Result<()> {
        Ok(())
    }
}
