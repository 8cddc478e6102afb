//! `memory`: index and search an agent's Markdown memory from the command line.

mod engines;
mod output;

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{bail, Context};
use clap::{Parser, Subcommand};
use memory_core::registry::OpenContext;
use memory_core::{Config, GetRequest, MemoryBackend, SearchRequest, SyncOptions};

#[derive(Parser, Debug)]
#[command(name = "memory", version, about = "Search an AI agent's Markdown memory (MEMORY.md, memory/*.md)")]
struct Cli {
    /// The agent's workspace (holds MEMORY.md and memory/). Default: the current folder.
    #[arg(long, global = true, env = "MEMORY_WORKSPACE")]
    workspace: Option<PathBuf>,
    /// A JSON5 config file (OpenClaw-compatible `memory.*` keys).
    #[arg(long, global = true, env = "MEMORY_CONFIG")]
    config: Option<PathBuf>,
    /// Where indexes are kept. Default: $XDG_STATE_HOME/memory-rs or ~/.local/state/memory-rs.
    #[arg(long, global = true, env = "MEMORY_STATE_DIR")]
    state_dir: Option<PathBuf>,
    /// Agent id: each agent has its own index.
    #[arg(long, global = true, default_value = "main", env = "MEMORY_AGENT")]
    agent: String,
    /// More log output (-v info, -vv debug). RUST_LOG overrides.
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    verbose: u8,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Bring the index in step with the memory files.
    Index {
        /// Rebuild everything (beside the live index, swapped in when complete).
        #[arg(long)]
        force: bool,
        #[arg(long)]
        json: bool,
    },
    /// Ranked snippets for a query (indexes first if the workspace was never indexed).
    Search {
        query: String,
        #[arg(long)]
        max_results: Option<usize>,
        #[arg(long)]
        min_score: Option<f64>,
        #[arg(long)]
        json: bool,
    },
    /// Read a memory file, or some of its lines.
    Get {
        path: String,
        /// First line (1-based).
        #[arg(long)]
        from: Option<usize>,
        /// Number of lines.
        #[arg(long)]
        lines: Option<usize>,
        #[arg(long)]
        json: bool,
    },
    /// What is indexed, where, and whether it is fresh.
    Status {
        #[arg(long)]
        json: bool,
    },
    /// Delete the index (never the memory files).
    Reset {
        /// Confirm the deletion.
        #[arg(long)]
        yes: bool,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    init_logging(cli.verbose);
    let rt = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match rt.block_on(run(cli)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {}", one_line(&e));
            ExitCode::FAILURE
        }
    }
}

/// The error and its causes on one line.
fn one_line(e: &anyhow::Error) -> String {
    let mut parts: Vec<String> = Vec::new();
    for cause in e.chain() {
        let s = cause.to_string();
        if !parts.iter().any(|p| p.contains(&s)) {
            parts.push(s);
        }
    }
    parts.join(": ").replace('\n', " ")
}

fn init_logging(verbose: u8) {
    let default = match verbose {
        0 => "warn",
        1 => "info",
        _ => "debug",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    use std::io::IsTerminal;
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .with_target(false)
        .without_time()
        .compact()
        .init();
}

fn default_state_dir() -> PathBuf {
    if let Some(x) = std::env::var_os("XDG_STATE_HOME").filter(|v| !v.is_empty()) {
        return PathBuf::from(x).join("memory-rs");
    }
    match std::env::var_os("HOME") {
        Some(h) => PathBuf::from(h).join(".local/state/memory-rs"),
        None => PathBuf::from(".memory-rs-state"),
    }
}

async fn open(cli: &Cli) -> anyhow::Result<Box<dyn MemoryBackend>> {
    let workspace = match &cli.workspace {
        Some(w) => w.clone(),
        None => std::env::current_dir().context("cannot read the current folder")?,
    };
    if !workspace.is_dir() {
        bail!("workspace {} is not a folder", workspace.display());
    }
    let workspace = std::fs::canonicalize(&workspace).with_context(|| format!("cannot resolve {}", workspace.display()))?;
    let config = match &cli.config {
        Some(p) => Config::load(p)?,
        None => Config::default(),
    };
    let embedder = engines::embedder(&config)?;
    let ctx = OpenContext {
        config: Arc::new(config),
        workspace,
        state_dir: cli.state_dir.clone().unwrap_or_else(default_state_dir),
        agent_id: cli.agent.clone(),
        embedder,
    };
    Ok(engines::registry().open(ctx).await?)
}

async fn run(cli: Cli) -> anyhow::Result<()> {
    let engine = open(&cli).await?;
    let result = run_command(&cli.command, engine.as_ref()).await;
    let closed = engine.close().await;
    result?;
    closed?;
    Ok(())
}

async fn run_command(command: &Command, engine: &dyn MemoryBackend) -> anyhow::Result<()> {
    match command {
        Command::Index { force, json } => {
            let started = std::time::Instant::now();
            let report = engine.sync(SyncOptions { force: *force }).await?;
            output::sync_report(&report, started.elapsed(), *json)
        }
        Command::Search { query, max_results, min_score, json } => {
            let request = SearchRequest { query: query.clone(), max_results: *max_results, min_score: *min_score, sources: Vec::new() };
            let response = engine.search(&request).await?;
            output::search(&response, *json)
        }
        Command::Get { path, from, lines, json } => {
            let response = engine.get(&GetRequest { path: path.clone(), from: *from, lines: *lines }).await?;
            output::get(&response, *json)
        }
        Command::Status { json } => {
            let status = engine.status().await?;
            output::status(&status, *json)
        }
        Command::Reset { yes } => {
            let status = engine.status().await?;
            let location = status.index_path.unwrap_or_else(|| status.backend.clone());
            if !yes {
                bail!("reset deletes the index at {location} (memory files are kept); run again with --yes to confirm");
            }
            engine.reset().await?;
            println!("Index deleted: {location}");
            Ok(())
        }
    }
}
