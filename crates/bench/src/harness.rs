//! `memory-bench harness`: memory-rs's builtin engine opened in this process, for the figures the `memory`
//! binary cannot give: hybrid search with the seeded embedder (no CPU model can embed 100k chunks in a
//! benchmark's time), and in-process search latency (one engine, many queries, each call timed).

use std::io::BufRead;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use memory_builtin::BuiltinFactory;
use memory_core::indexed::IndexedBackend;
use memory_core::registry::OpenContext;
use memory_core::{Config, MemoryBackend, SearchRequest, SyncOptions};

use crate::seeded_embedder::seeded_embedder;

/// The local test model's width (all-MiniLM-L6-v2), so vectors cost what real ones do.
pub const SEEDED_DIMS: usize = 384;
pub const SEEDED_SEED: u64 = 42;

#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Mode {
    Keyword,
    Hybrid,
}

#[derive(clap::Subcommand)]
pub enum Action {
    /// Sync the index with the files; prints the sync report as JSON.
    Index,
    /// One search; prints the results as JSON (`{"results":[...]}`).
    Search {
        query: String,
        #[arg(long, default_value_t = 6)]
        max_results: usize,
    },
    /// One query per stdin line; one JSON line per query: {"query","ms","paths":[{path,startLine,endLine,score}]}.
    SearchStdin {
        #[arg(long, default_value_t = 6)]
        max_results: usize,
    },
}

async fn open(mode: Mode, workspace: &Path, state: &Path) -> anyhow::Result<IndexedBackend> {
    let mut config = Config::default();
    // Keyword mode reads the index the `memory` binary wrote with `provider: "none"`: same identity.
    config.memory.search.provider = "none".into();
    let ctx = OpenContext::new(Arc::new(config), std::fs::canonicalize(workspace)?, state.to_path_buf(), "main").with_embedder(match mode {
        Mode::Keyword => None,
        Mode::Hybrid => Some(Arc::new(seeded_embedder(SEEDED_DIMS, SEEDED_SEED))),
    });
    Ok(BuiltinFactory.open_indexed(ctx).await?)
}

fn request(query: &str, max_results: usize) -> SearchRequest {
    SearchRequest { max_results: Some(max_results), min_score: Some(0.0), ..SearchRequest::new(query.to_string()) }
}

pub async fn run(mode: Mode, workspace: &Path, state: &Path, action: Action) -> anyhow::Result<()> {
    let engine = open(mode, workspace, state).await?;
    match action {
        Action::Index => {
            let report = engine.sync(SyncOptions::default()).await?;
            println!("{}", serde_json::to_string(&report)?);
        }
        Action::Search { query, max_results } => {
            let r = engine.search(&request(&query, max_results)).await?;
            println!("{}", serde_json::to_string(&r)?);
        }
        Action::SearchStdin { max_results } => {
            for line in std::io::stdin().lock().lines() {
                let query = line?;
                if query.trim().is_empty() {
                    continue;
                }
                let t = Instant::now();
                let r = engine.search(&request(&query, max_results)).await?;
                let ms = t.elapsed().as_secs_f64() * 1e3;
                let paths: Vec<_> = r
                    .results
                    .iter()
                    .map(|h| serde_json::json!({"path": h.path, "startLine": h.start_line, "endLine": h.end_line, "score": h.score}))
                    .collect();
                println!("{}", serde_json::json!({"query": query, "ms": ms, "paths": paths}));
            }
        }
    }
    engine.close().await?;
    Ok(())
}
