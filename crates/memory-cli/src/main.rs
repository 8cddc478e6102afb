//! `memory`: index and search an agent's Markdown memory from the command line.

// A panic in a long-lived server fails the requests in flight: production code says what went wrong instead
// (`memory_core::locks` for lock poisoning); tests unwrap freely.
#![cfg_attr(not(test), deny(clippy::unwrap_used))]

mod append;
mod backlog;
mod doctor;
mod http;
mod mcp_gate;
mod openclaw;
mod openclaw_plugin;
mod output;
mod progress;
mod serve;
mod server;
mod status;
mod unopened;
mod watch;

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{bail, Context};
use clap::{CommandFactory, Parser, Subcommand};
use memory_core::registry::OpenContext;
use memory_core::space::AgentSpace;
use memory_core::{Config, GetRequest, MemoryBackend, RecallRequest, SearchRequest, SyncOptions};

#[derive(Parser, Debug)]
#[command(
    name = "memory",
    version = env!("MEMORY_LONG_VERSION"),
    about = "Search an AI agent's Markdown memory (MEMORY.md, memory/*.md)",
    after_help = EXAMPLES
)]
struct Cli {
    /// The agent's workspace (holds MEMORY.md and memory/). Default: the current folder if it has memory files,
    /// else an OpenClaw agent's workspace (~/.openclaw/workspace) if there is one, else the current folder.
    #[arg(long, global = true, env = "MEMORY_WORKSPACE")]
    workspace: Option<PathBuf>,
    /// A JSON5 config file (OpenClaw-compatible `memory.*` keys). Default: OpenClaw's config
    /// (OPENCLAW_CONFIG_PATH, else ~/.openclaw/openclaw.json) when present.
    #[arg(long, global = true, env = "MEMORY_CONFIG")]
    config: Option<PathBuf>,
    /// Where indexes are kept. Default: $XDG_STATE_HOME/memory-rs or ~/.local/state/memory-rs.
    #[arg(long, global = true, env = "MEMORY_STATE_DIR")]
    state_dir: Option<PathBuf>,
    /// Agent id: each agent has its own index.
    #[arg(long, global = true, default_value = "main", env = "MEMORY_AGENT")]
    agent: String,
    /// Answer here even when a shared server (`memory server start`) runs for this state folder.
    #[arg(long, global = true, env = "MEMORY_NO_SERVER", value_parser = clap::builder::BoolishValueParser::new())]
    no_server: bool,
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
    /// Ranked snippets for a query. Sees what was just written: files changed since the last sync (a stat per
    /// file) are synced first; a never-indexed workspace is indexed first.
    Search {
        query: String,
        #[arg(long)]
        max_results: Option<usize>,
        #[arg(long)]
        min_score: Option<f64>,
        /// Search only this source (`memory` or `sessions`); repeat for several. Default: all configured.
        #[arg(long = "source", value_parser = parse_source)]
        sources: Vec<memory_core::Source>,
        /// An active repository key (e.g. `github.com/org/repo`; repeat, most recent first, at most 4): entries
        /// tagged `<!-- project: key -->` of an active repository rank higher, those of another lower.
        #[arg(long = "project")]
        projects: Vec<String>,
        #[arg(long)]
        json: bool,
    },
    /// Trigger recall: the entries of MEMORY.md / USER.md whose `<!-- trigger: ... -->` phrases match MESSAGE
    /// strongly (score >= 0.72, at most 3), as OpenClaw injects them before a reply.
    Recall {
        /// The inbound message (may be left out with --project-entries).
        #[arg(required_unless_present = "project_entries")]
        message: Option<String>,
        /// An active repository key (repeat, most recent first, at most 4): a project-tagged entry is eligible
        /// only while every one of its keys is active.
        #[arg(long = "project")]
        projects: Vec<String>,
        /// Also list up to N entries of MEMORY.md tagged for the active repositories (OpenClaw's Project Memory).
        #[arg(long)]
        project_entries: Option<usize>,
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
        /// Characters of the first line to skip: reads the rest of a line longer than 12,000 characters (the
        /// `nextOffset` of the answer that cut it).
        #[arg(long)]
        offset: Option<usize>,
        #[arg(long)]
        json: bool,
    },
    /// What is indexed, where, and whether it is fresh.
    #[command(after_help = "Examples:\n  memory status\n  memory status --deep --json   # also run a real search and a real embedding")]
    Status {
        /// Probe for real: run a search on the engine, read the whole index for damage (a damaged index is set
        /// aside and rebuilt) and run an embedding on the provider.
        #[arg(long)]
        deep: bool,
        #[arg(long)]
        json: bool,
    },
    /// Check the setup: config, workspace, engine and fallback, embedding model, reranker, index, skipped files,
    /// shared server, OpenClaw plugin. One line each (OK, WARN or FAIL with the fix); exit status 1 on a FAIL.
    #[command(after_help = "Examples:\n  memory doctor\n  memory doctor --deep --json   # also read the whole index for damage")]
    Doctor {
        /// Also read the whole index for damage (a damaged index is set aside and rebuilt, as `status --deep`).
        #[arg(long)]
        deep: bool,
        /// An array of {check, level, message, fix}.
        #[arg(long)]
        json: bool,
    },
    /// Keep the index fresh: re-index changed memory files as they change (until Ctrl-C).
    #[command(after_help = "Debounce: memory.search.sync.watchDebounceMs (default 1500); also syncs every\n\
        memory.search.sync.intervalMinutes when set.\n\nExamples:\n  memory watch\n  memory watch --json   # one JSON line per sync")]
    Watch {
        /// Print one JSON line per event ({"event":"ready"|"sync",...}) on stdout.
        #[arg(long)]
        json: bool,
    },
    /// Serve memory_search and memory_get (and optionally memory_append) over MCP on stdio.
    #[command(after_help = "Register with an MCP client, e.g. Claude Code:\n  \
        claude mcp add memory -- memory --workspace ~/agent serve\n\nExamples:\n  memory serve\n  memory --workspace ~/.openclaw/workspace serve --allow-append")]
    Serve {
        /// Offer the memory_append tool (writes to today's memory/YYYY-MM-DD.md).
        #[arg(long, env = "MEMORY_ALLOW_APPEND", value_parser = clap::builder::BoolishValueParser::new())]
        allow_append: bool,
        /// Do not watch the files. Searches stay fresh all the same: each one first checks the files (a stat per
        /// file; skipped while the server's change journal has seen no change since the last check) and syncs
        /// what changed (`memory.search.sync.onSearch`, default true); the watcher only saves that work.
        #[arg(long)]
        no_watch: bool,
        #[command(flatten)]
        http: http::HttpArgs,
    },
    /// A shared server for this state folder: one-shot commands (search, get, status, index, append) ask it
    /// instead of opening the index themselves, for every workspace and agent. Started only when you ask.
    #[command(after_help = "Examples:\n  memory server start                 # in the background; exits after 30 minutes unused\n  \
        memory server status\n  memory server stop")]
    Server {
        #[command(subcommand)]
        action: server::control::Action,
    },
    /// Append a timestamped entry to today's memory/YYYY-MM-DD.md and index it.
    #[command(
        after_help = "Examples:\n  memory append \"Deploys go through the canary first\"\n  echo \"Alice prefers Tuesday meetings\" | memory append -"
    )]
    Append {
        /// The text to remember; `-` reads it from stdin.
        #[arg(required = true, num_args = 1..)]
        text: Vec<String>,
        #[arg(long)]
        json: bool,
    },
    /// Print a shell completion script.
    #[command(after_help = "Examples:\n  memory completions bash > ~/.local/share/bash-completion/completions/memory\n  \
        memory completions zsh > ~/.zfunc/_memory\n  memory completions fish > ~/.config/fish/completions/memory.fish")]
    Completions { shell: clap_complete::Shell },
    /// The OpenClaw memory plugin: install it into OpenClaw, or check that it serves the memory slot.
    Openclaw {
        #[command(subcommand)]
        action: openclaw_plugin::Action,
    },
    /// Embed the files waiting for their vectors, beside searches, and exit (started in the background by a
    /// search or an append that found some: `MEMORY_BACKGROUND_EMBED=0` turns that off).
    #[command(name = "embed-pending", hide = true)]
    EmbedPending,
    /// Delete the index (never the memory files).
    Reset {
        /// Confirm the deletion.
        #[arg(long)]
        yes: bool,
    },
}

const EXAMPLES: &str = "Examples:
  memory search \"where does the gateway run?\"
  memory --workspace ~/agent index
  memory get memory/2026-11-29.md --from 10 --lines 20
  memory status --deep
  memory doctor                        # what works, what does not, and the fix
  memory watch
  memory serve --allow-append          # MCP server on stdio
  memory serve --http 127.0.0.1:8765   # MCP over HTTP (bearer token in the state folder)
  memory server start                  # a shared server: one-shot commands answer in milliseconds
  memory append \"Alice prefers Tuesday meetings\"
  memory openclaw install              # OpenClaw agents search with this engine";

fn main() -> ExitCode {
    // An empty variable (`MEMORY_WORKSPACE=`) means unset, as for the shell's own; clap would take it as a
    // missing value. Removed before any thread starts.
    for name in ["MEMORY_WORKSPACE", "MEMORY_CONFIG", "MEMORY_STATE_DIR", "MEMORY_AGENT", "MEMORY_ALLOW_APPEND", "MEMORY_NO_SERVER"] {
        if std::env::var_os(name).is_some_and(|v| v.is_empty()) {
            std::env::remove_var(name);
        }
    }
    let cli = Cli::parse();
    if let Command::Completions { shell } = &cli.command {
        clap_complete::generate(*shell, &mut Cli::command(), "memory", &mut std::io::stdout());
        return ExitCode::SUCCESS;
    }
    // A server's log file says when each line happened; a command's stderr does not need to.
    let timed = matches!(&cli.command, Command::Server { action: server::control::Action::Run { .. } });
    // The doctor says what the engines' warnings would: its lines stay alone unless logs are asked for.
    let quiet = matches!(&cli.command, Command::Doctor { .. });
    init_logging(cli.verbose, timed, quiet);
    if let Command::Openclaw { action } = &cli.command {
        // Reads and edits OpenClaw's config only: no engine to open.
        return match openclaw_plugin::run(action) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("error: {e:#}");
                ExitCode::FAILURE
            }
        };
    }
    if let Command::Doctor { deep, json } = &cli.command {
        // Opens what it checks itself, never through a shared server: the server is one of the checks.
        let state_dir = cli.state_dir.clone().unwrap_or_else(default_state_dir);
        let args = doctor::Args { config: cli.config.as_deref(), workspace: cli.workspace.as_deref(), state_dir, agent: &cli.agent, deep: *deep };
        return match doctor::run(&args, *json) {
            Ok(true) => ExitCode::SUCCESS,
            Ok(false) => ExitCode::FAILURE,
            Err(e) => report(Err(e)),
        };
    }
    if let Command::Server { action } = &cli.command {
        let state_dir = cli.state_dir.clone().unwrap_or_else(default_state_dir);
        return report(server::control::run(action, &state_dir));
    }
    // search, get, status, index, append: one job, answered by a shared server when one answers, else here.
    match job_of(&cli.command) {
        Ok(Some(job)) => {
            return match one_shot(&cli, job) {
                Ok(answer) => answer.print(),
                Err(e) => report(Err(e)),
            }
        }
        Ok(None) => {}
        Err(e) => return report(Err(e)),
    }
    // Watch and serve sync on a blocking thread while other tasks answer: they need a multi-thread runtime.
    let long_running = matches!(cli.command, Command::Watch { .. } | Command::Serve { .. });
    let rt = if long_running {
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()
    } else {
        tokio::runtime::Builder::new_current_thread().enable_all().build()
    };
    let rt = match rt {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    report(rt.block_on(run(cli)))
}

/// The exit of a command that printed its own output.
fn report(result: anyhow::Result<()>) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        // The reader went away (`memory search x | head -1`): nothing more to say, as `grep` says nothing.
        Err(e) if is_broken_pipe(&e) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {}", one_line(&e));
            ExitCode::FAILURE
        }
    }
}

fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| c.downcast_ref::<std::io::Error>().is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe))
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

fn init_logging(verbose: u8, timed: bool, quiet: bool) {
    let default = match verbose {
        0 if quiet => "error",
        0 => "warn",
        1 => "info",
        _ => "debug",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    use std::io::IsTerminal;
    let fmt = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .with_target(false)
        .compact();
    if timed {
        fmt.init();
    } else {
        fmt.without_time().init();
    }
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

/// The engine and what the host resolved to open it.
struct Opened {
    engine: Arc<dyn MemoryBackend>,
    /// Where the agent's memory lives, as the engine was given it (the watcher and `append` ask it too).
    space: Arc<AgentSpace>,
    config: Arc<Config>,
    config_path: Option<PathBuf>,
    workspace_from: openclaw::WorkspaceFrom,
    /// Why embeddings do not answer as configured (shown by `status`).
    provider_note: Option<String>,
    /// The second stage the engine was given (`status` describes it and `--deep` tries it).
    reranker: Option<Arc<dyn memory_core::rerank::Reranker>>,
}

fn parse_source(s: &str) -> Result<memory_core::Source, String> {
    memory_core::Source::parse(s).ok_or_else(|| format!("unknown source `{s}` (memory or sessions)"))
}

/// The workspace and config a command works on, before any engine is opened.
struct Resolved {
    host: memory_host::Host,
    workspace: PathBuf,
    workspace_from: openclaw::WorkspaceFrom,
    config: Config,
    config_path: Option<PathBuf>,
    /// Names the config's content: a shared server keeps one engine per workspace, agent and config content.
    config_hash: String,
}

/// What a command resolves from: the flags, or what a client sent a shared server.
struct ResolveArgs<'a> {
    config_path: Option<PathBuf>,
    workspace: Option<&'a std::path::Path>,
    agent: &'a str,
    is_status: bool,
}

fn resolve(cli: &Cli) -> anyhow::Result<Resolved> {
    let config_path = match &cli.config {
        Some(p) => Some(p.clone()),
        None => openclaw::config_path()?,
    };
    let is_status = matches!(cli.command, Command::Status { .. });
    resolve_at(ResolveArgs { config_path, workspace: cli.workspace.as_deref(), agent: &cli.agent, is_status })
}

fn resolve_at(args: ResolveArgs<'_>) -> anyhow::Result<Resolved> {
    let ResolveArgs { config_path, workspace, agent, is_status } = args;
    // Read once: the workspace probe and the config use the same value.
    let config_json = config_path.as_deref().map(openclaw::read_json).transpose()?;
    let config_hash = server::protocol::content_hash(config_json.as_ref());
    let (workspace, workspace_from) = openclaw::resolve_workspace(workspace, config_json.as_ref(), agent)?;
    if !workspace.is_dir() {
        bail!("workspace {} is not a folder", workspace.display());
    }
    let workspace = std::fs::canonicalize(&workspace).with_context(|| format!("cannot resolve {}", workspace.display()))?;
    let host = memory_host::Host::new();
    // Every engine's block is checked here, whichever engine is configured (a misspelt key is never silent).
    let config = match (&config_path, config_json) {
        (Some(p), Some(json)) => host.config_from_file_value(json, p, Some(agent))?,
        _ => Config::default(),
    };
    if !config.memory.search.enabled && !is_status {
        bail!("memory search is turned off for agent `{agent}` (memorySearch.enabled: false in its config); its memory tools are off");
    }
    Ok(Resolved { host, workspace, workspace_from, config, config_path, config_hash })
}

/// `memory get` reads a file: for the engines that read it from the memory roots (builtin, LanceDB: both
/// `IndexedBackend`), no index is opened, so a full, read-only or damaged state disk never stands in its way.
/// `None`: the engine must answer (QMD's `qmd://` paths and collections, plugins).
fn get_without_index(resolved: &Resolved, request: &GetRequest) -> Option<memory_core::Result<memory_core::GetResponse>> {
    unopened::Reader::of(&resolved.workspace, &resolved.config)?.read(request)
}

/// Open the engine for `agent` (the one open logic: the CLI's commands and the shared server's engines).
async fn open(resolved: Resolved, state_dir: PathBuf, agent: &str, is_status: bool, progress: bool) -> anyhow::Result<Opened> {
    let Resolved { host, workspace, workspace_from, config, config_path, .. } = resolved;
    let config = Arc::new(config);
    // `status` reports a half-set-up provider (no key yet) instead of failing on it.
    let (embedder, provider_note) = match memory_host::embedder(&config) {
        Ok(e) => {
            let note = match e.as_ref().and_then(|e| e.unavailable()) {
                Some(why) => {
                    Some(format!("UNAVAILABLE ({why}); searches answer by their words and the index keeps its vectors until the model is back"))
                }
                None => providers::provider_note(&config),
            };
            (e, note)
        }
        Err(e) if is_status => (None, Some(format!("{e}; keyword search answers until it is set up"))),
        Err(e) => return Err(e.into()),
    };
    let reranker = memory_host::reranker(&config)?;
    let ctx = OpenContext::new(config.clone(), workspace, state_dir, agent).with_embedder(embedder).with_reranker(reranker.clone());
    let space = ctx.space.clone();
    let engine = host.registry().open(ctx).await?;
    if progress {
        // Bars only when someone watches a terminal.
        engine.set_progress(Some(progress::bar()));
    }
    Ok(Opened { engine: Arc::from(engine), space, config, config_path, workspace_from, provider_note, reranker })
}

/// What `search`, `get`, `status`, `index` and `append` do, as data: run here or by a shared server
/// (`server/`), which answers with the bytes this process would print.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
#[serde(tag = "cmd", rename_all = "camelCase", rename_all_fields = "camelCase", deny_unknown_fields)]
pub enum Job {
    Index {
        force: bool,
        json: bool,
    },
    Search {
        query: String,
        max_results: Option<usize>,
        min_score: Option<f64>,
        sources: Vec<memory_core::Source>,
        #[serde(default)]
        projects: Vec<String>,
        json: bool,
    },
    Recall {
        message: Option<String>,
        #[serde(default)]
        projects: Vec<String>,
        project_entries: Option<usize>,
        json: bool,
    },
    Get {
        path: String,
        from: Option<usize>,
        lines: Option<usize>,
        offset: Option<usize>,
        json: bool,
    },
    Status {
        deep: bool,
        json: bool,
    },
    /// `written`: the entry is already in the file (written by the client before it handed the indexing to a
    /// server); only indexing and the answer remain, so a retry never writes it twice.
    Append {
        text: String,
        written: Option<memory_core::append::Appended>,
        json: bool,
    },
}

impl Job {
    fn is_status(&self) -> bool {
        matches!(self, Job::Status { .. })
    }

    /// A search or an append leaves the files waiting for vectors to a sync nobody waits for
    /// ([`backlog::start_if_waiting`]).
    fn may_leave_vectors_waiting(&self) -> bool {
        matches!(self, Job::Search { .. } | Job::Append { .. })
    }
}

fn job_of(command: &Command) -> anyhow::Result<Option<Job>> {
    Ok(Some(match command {
        Command::Index { force, json } => Job::Index { force: *force, json: *json },
        Command::Search { query, max_results, min_score, sources, projects, json } => Job::Search {
            query: query.clone(),
            max_results: *max_results,
            min_score: *min_score,
            sources: sources.clone(),
            projects: projects.clone(),
            json: *json,
        },
        Command::Recall { message, projects, project_entries, json } => {
            Job::Recall { message: message.clone(), projects: projects.clone(), project_entries: *project_entries, json: *json }
        }
        Command::Get { path, from, lines, offset, json } => Job::Get { path: path.clone(), from: *from, lines: *lines, offset: *offset, json: *json },
        Command::Status { deep, json } => Job::Status { deep: *deep, json: *json },
        Command::Append { text, json } => {
            let text = if text.len() == 1 && text[0] == "-" { read_entry_from_stdin()? } else { text.join(" ") };
            Job::Append { text, written: None, json: *json }
        }
        _ => return Ok(None),
    }))
}

/// What a job printed, and its exit code.
#[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct Answer {
    stdout: String,
    stderr: String,
    exit: u8,
}

impl Answer {
    fn failed(&mut self, e: &anyhow::Error) {
        self.stderr.push_str(&format!("error: {}\n", one_line(e)));
        self.exit = 1;
    }

    fn print(self) -> ExitCode {
        let mut out = std::io::stdout().lock();
        match out.write_all(self.stdout.as_bytes()).and_then(|()| out.flush()) {
            Ok(()) => {}
            // The reader went away (`memory search x | head -1`): nothing more to say, as `grep` says nothing.
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => return ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("error: cannot write the answer: {e}");
                return ExitCode::FAILURE;
            }
        }
        let _ = std::io::stderr().write_all(self.stderr.as_bytes());
        ExitCode::from(self.exit)
    }
}

/// A job of a one-shot command: the shared server for this state folder answers when it runs, is this version
/// and answers in time; otherwise (or with `--no-server`) this process opens the engine. Same bytes either way.
fn one_shot(cli: &Cli, mut job: Job) -> anyhow::Result<Answer> {
    let resolved = resolve(cli)?;
    let state_dir = cli.state_dir.clone().unwrap_or_else(default_state_dir);
    if let Job::Get { path, from, lines, offset, json } = &job {
        let request = GetRequest { path: path.clone(), from: *from, lines: *lines, offset: *offset };
        if let Some(response) = get_without_index(&resolved, &request) {
            // A read of a file: no engine, no server.
            let mut answer = Answer::default();
            let (mut out, mut err) = (Vec::new(), Vec::new());
            let result = response.map_err(anyhow::Error::from).and_then(|r| output::get(&mut out, &mut err, &r, *json));
            answer.stdout = String::from_utf8_lossy(&out).into_owned();
            answer.stderr = String::from_utf8_lossy(&err).into_owned();
            if let Err(e) = result {
                answer.failed(&e);
            }
            return Ok(answer);
        }
    }
    let progress = match &job {
        Job::Index { json, .. } | Job::Search { json, .. } => progress::wanted(*json),
        _ => false,
    };
    // A long `index` someone watches keeps its progress bars: it runs here.
    let ask_server = !cli.no_server && (!progress || !matches!(job, Job::Index { .. }));
    if ask_server && server::client::present(&state_dir) {
        if let Job::Append { text, written: written @ None, .. } = &mut job {
            // Written here, once; the server (or this process, if the server fails) only indexes it.
            *written = Some(memory_core::append::append_entry(&resolved.workspace, text)?);
        }
        match server::client::ask(&state_dir, &resolved, &cli.agent, &job) {
            Ok(answer) => {
                tracing::debug!("answered by the shared server");
                return Ok(answer);
            }
            Err(why) => tracing::debug!(%why, "the shared server did not answer; answering in-process"),
        }
    }
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().context("cannot start the runtime")?;
    rt.block_on(async {
        let opened = open(resolved, state_dir.clone(), &cli.agent, job.is_status(), progress).await?;
        let mut answer = run_job(&job, &opened).await;
        if job.may_leave_vectors_waiting() {
            let target = backlog::Target {
                workspace: opened.space.workspace(),
                config_path: opened.config_path.as_deref(),
                state_dir: &state_dir,
                agent: &cli.agent,
            };
            backlog::start_if_waiting(&opened, &target).await;
        }
        if let Err(e) = opened.engine.close().await {
            answer.failed(&e.into());
        }
        Ok(answer)
    })
}

/// Run a job on an open engine: what it prints and its exit code (an error is printed as `error: ...`).
async fn run_job(job: &Job, opened: &Opened) -> Answer {
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let result = run_job_into(job, opened, &mut out, &mut err).await;
    let mut answer = Answer { stdout: String::from_utf8_lossy(&out).into_owned(), stderr: String::from_utf8_lossy(&err).into_owned(), exit: 0 };
    if let Err(e) = result {
        answer.failed(&e);
    }
    answer
}

async fn run_job_into(job: &Job, opened: &Opened, out: &mut Vec<u8>, err: &mut Vec<u8>) -> anyhow::Result<()> {
    let engine = opened.engine.as_ref();
    match job {
        Job::Index { force, json } => {
            let started = std::time::Instant::now();
            let report = engine.sync(SyncOptions { force: *force, ..SyncOptions::default() }).await?;
            output::sync_report(out, &report, started.elapsed(), *json)
        }
        Job::Search { query, max_results, min_score, sources, projects, json } => {
            let request = SearchRequest {
                query: query.clone(),
                max_results: *max_results,
                min_score: *min_score,
                sources: sources.clone(),
                active_projects: projects.clone(),
            };
            let response = engine.search(&request).await?;
            output::search(out, err, &response, *json)
        }
        Job::Recall { message, projects, project_entries, json } => {
            let request =
                RecallRequest { message: message.clone().unwrap_or_default(), active_projects: projects.clone(), project_entries: *project_entries };
            let response = engine.recall(&request).await?;
            output::recall(out, err, &response, *json)
        }
        Job::Get { path, from, lines, offset, json } => {
            let response = engine.get(&GetRequest { path: path.clone(), from: *from, lines: *lines, offset: *offset }).await?;
            output::get(out, err, &response, *json)
        }
        Job::Status { deep, json } => {
            let host = status::HostInfo {
                config: &opened.config,
                config_path: opened.config_path.as_deref(),
                workspace_from: opened.workspace_from,
                provider_note: opened.provider_note.as_deref(),
                reranker: opened.reranker.as_deref(),
            };
            let (s, v) = status::collect(engine, &host, *deep).await?;
            if *json {
                writeln!(out, "{}", serde_json::to_string_pretty(&v)?)?;
                Ok(())
            } else {
                output::status(out, &s, false)?;
                status::print_host(out, &v)
            }
        }
        Job::Append { text, written, json } => {
            let r = match written {
                Some(appended) => append::index_appended(engine, appended.clone()).await,
                None => append::append_and_index(engine, opened.space.workspace(), text).await?,
            };
            if *json {
                writeln!(out, "{}", serde_json::to_string_pretty(&r)?)?;
            } else {
                writeln!(
                    out,
                    "Appended to {} (lines {}-{}){}",
                    r.appended.path,
                    r.appended.start_line,
                    r.appended.end_line,
                    if r.indexed { "" } else { "; not indexed yet" }
                )?;
                if let Some(w) = &r.warning {
                    writeln!(err, "warning: {w}")?;
                }
            }
            Ok(())
        }
    }
}

async fn run(cli: Cli) -> anyhow::Result<()> {
    let resolved = resolve(&cli)?;
    let progress = match &cli.command {
        Command::Watch { json } => progress::wanted(*json),
        _ => false,
    };
    let state_dir = cli.state_dir.clone().unwrap_or_else(default_state_dir);
    // What `memory serve` needs to serve without its engine, kept before `open` takes the resolution.
    let unopened = matches!(cli.command, Command::Serve { .. }).then(|| UnopenedArgs::of(&resolved, &state_dir, &cli.agent));
    let opened = match (open(resolved, state_dir.clone(), &cli.agent, false, progress).await, unopened) {
        (Ok(opened), _) => opened,
        (Err(e), Some(args)) => {
            let Command::Serve { allow_append, http, .. } = &cli.command else { return Err(e) };
            return serve_unopened(args, &e, *allow_append, http, &state_dir).await;
        }
        (Err(e), None) => return Err(e),
    };
    let result = run_command(&cli, &opened).await;
    let closed = opened.engine.close().await;
    result?;
    closed?;
    Ok(())
}

/// What `memory serve` keeps to serve when its engine cannot open ([`unopened::Reopening`]): how to open it again
/// and how to read the files without it.
struct UnopenedArgs {
    name: String,
    workspace: PathBuf,
    reopen: unopened::Reopen,
    reader: Option<unopened::Reader>,
}

impl UnopenedArgs {
    fn of(resolved: &Resolved, state_dir: &std::path::Path, agent: &str) -> UnopenedArgs {
        let (config_path, workspace, agent, state) =
            (resolved.config_path.clone(), resolved.workspace.clone(), agent.to_string(), state_dir.to_path_buf());
        let reopen: unopened::Reopen = Box::new(move || {
            let (config_path, workspace, agent, state) = (config_path.clone(), workspace.clone(), agent.clone(), state.clone());
            // The same resolution and open as at start: a config fixed meanwhile is read again.
            Box::pin(async move {
                let resolved = resolve_at(ResolveArgs { config_path, workspace: Some(&workspace), agent: &agent, is_status: false })?;
                Ok(open(resolved, state, &agent, false, false).await?.engine)
            })
        });
        let reader = unopened::Reader::of(&resolved.workspace, &resolved.config);
        UnopenedArgs { name: resolved.config.memory.backend.clone(), workspace: resolved.workspace.clone(), reopen, reader }
    }
}

/// `memory serve` with an engine that could not open: the tools answer why (and `memory_get` reads the files)
/// until it opens. No watcher: once it opens, each search checks the files itself.
async fn serve_unopened(
    args: UnopenedArgs,
    error: &anyhow::Error,
    allow_append: bool,
    http: &http::HttpArgs,
    state_dir: &std::path::Path,
) -> anyhow::Result<()> {
    let options = http.to_options(state_dir)?;
    let engine: Arc<dyn MemoryBackend> = Arc::new(unopened::Reopening::new(args.name, error, args.reopen, args.reader));
    let result = serve_mcp(engine.clone(), args.workspace, allow_append, None, false, options).await;
    let closed = engine.close().await;
    result?;
    closed?;
    Ok(())
}

/// `memory serve`'s MCP server: over HTTP when `--http` gave `options`, else over stdio.
async fn serve_mcp(
    engine: Arc<dyn MemoryBackend>,
    workspace: PathBuf,
    allow_append: bool,
    watch: Option<watch::WatchHandle>,
    session_start_sync: bool,
    options: Option<http::HttpOptions>,
) -> anyhow::Result<()> {
    match options {
        Some(options) => http::run(engine, workspace, allow_append, watch, options).await,
        None => serve::run(engine, workspace, allow_append, watch, session_start_sync).await,
    }
}

/// The commands that are not jobs: they hold the engine (watch, serve) or delete it (reset).
async fn run_command(cli: &Cli, opened: &Opened) -> anyhow::Result<()> {
    let engine = opened.engine.as_ref();
    match &cli.command {
        Command::Reset { yes } => {
            // Reset is the cure for a broken index: it never depends on the index answering.
            let location = match engine.status().await {
                Ok(status) => status.index_path.unwrap_or_else(|| status.backend.clone()),
                Err(e) => {
                    tracing::warn!(error = %e, "the index cannot report its status; deleting it all the same");
                    format!("the {} index", engine.name())
                }
            };
            if !yes {
                bail!("reset deletes the index at {location} (memory files are kept); run again with --yes to confirm");
            }
            engine.reset().await?;
            writeln!(std::io::stdout(), "Index deleted: {location}")?;
            Ok(())
        }
        Command::Watch { json } => run_watch(opened, *json).await,
        Command::EmbedPending => backlog::run(opened).await,
        Command::Serve { allow_append, no_watch, http } => {
            let watch = if *no_watch || !opened.config.memory.search.sync.watch {
                None
            } else {
                Some(start_watch(opened, true, Arc::new(|_: &watch::SyncEvent| {})).await?)
            };
            let session_start_sync = opened.config.memory.search.sync.on_session_start;
            let options = http.to_options(&cli.state_dir.clone().unwrap_or_else(default_state_dir))?;
            serve_mcp(opened.engine.clone(), opened.space.workspace().to_path_buf(), *allow_append, watch, session_start_sync, options).await
        }
        _ => Ok(()),
    }
}

/// The text of `memory append -`: at most what one entry can hold (with room for surrounding whitespace), so
/// `append - </dev/zero` stops at once instead of reading without end.
fn read_entry_from_stdin() -> anyhow::Result<String> {
    use std::io::Read;
    let limit = memory_core::append::MAX_ENTRY_BYTES * 4;
    let mut buf = Vec::new();
    std::io::stdin().lock().take(limit as u64 + 1).read_to_end(&mut buf).context("cannot read stdin")?;
    if buf.len() > limit {
        bail!("stdin holds more than {limit} bytes; one entry holds at most {} bytes of text", memory_core::append::MAX_ENTRY_BYTES);
    }
    String::from_utf8(buf).context("the text on stdin is not UTF-8")
}

/// Watch what discovery indexes. `serving`: the first sync runs in the background (the server answers at once).
async fn start_watch(opened: &Opened, serving: bool, on_sync: watch::OnSync) -> anyhow::Result<watch::WatchHandle> {
    let search = &opened.config.memory.search;
    let targets = watch::WatchTargets::of(&opened.space, search);
    let options = watch::WatchOptions { initial_sync_in_background: serving, ..watch::WatchOptions::from_config(&search.sync) };
    watch::spawn(opened.engine.clone(), targets, options, on_sync).await
}

async fn run_watch(opened: &Opened, json: bool) -> anyhow::Result<()> {
    let on_sync: watch::OnSync = Arc::new(move |ev: &watch::SyncEvent| {
        let mut out = std::io::stdout().lock();
        if json {
            let mut v = serde_json::to_value(ev).unwrap_or_default();
            if let Some(o) = v.as_object_mut() {
                o.insert("event".into(), "sync".into());
            }
            let _ = writeln!(out, "{v}");
        } else {
            match (&ev.report, &ev.error) {
                (Some(r), _) => {
                    let _ = writeln!(
                        out,
                        "sync #{} ({:?}, {} changes): {} added, {} changed, {} removed, {} unchanged in {} ms{}",
                        ev.seq,
                        ev.trigger,
                        ev.changes,
                        r.files_added,
                        r.files_changed,
                        r.files_removed,
                        r.files_unchanged,
                        ev.took_ms,
                        if r.files_pending > 0 { format!("; {} waiting for embeddings", r.files_pending) } else { String::new() }
                    );
                }
                (_, Some(e)) => {
                    let _ = writeln!(out, "sync #{} failed: {e}", ev.seq);
                }
                _ => {}
            }
        }
        let _ = out.flush();
    });
    let handle = start_watch(opened, false, on_sync).await?;
    let debounce = opened.config.memory.search.sync.watch_debounce_ms;
    {
        let mut out = std::io::stdout().lock();
        if json {
            writeln!(
                out,
                "{}",
                serde_json::json!({ "event": "ready", "workspace": opened.space.workspace().display().to_string(), "debounceMs": debounce })
            )?;
        } else {
            writeln!(out, "Watching {} (debounce {debounce} ms); Ctrl-C to stop", opened.space.workspace().display())?;
        }
        out.flush()?;
    }
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
    handle.stop().await;
    Ok(())
}
