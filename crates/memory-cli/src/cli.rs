//! The command line: the flags and subcommands clap parses (what each does is said in its help).

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use crate::{http, openclaw_plugin, server};

#[derive(Parser, Debug)]
#[command(
    name = "memory",
    version = env!("MEMORY_LONG_VERSION"),
    about = "Search an AI agent's Markdown memory (MEMORY.md, memory/*.md)",
    after_help = EXAMPLES
)]
pub(crate) struct Cli {
    /// The agent's workspace (holds MEMORY.md and memory/). Default: the current folder if it has memory files,
    /// else an OpenClaw agent's workspace (~/.openclaw/workspace) if there is one, else the current folder.
    #[arg(long, global = true, env = "MEMORY_WORKSPACE")]
    pub(crate) workspace: Option<PathBuf>,
    /// A JSON5 config file (OpenClaw-compatible `memory.*` keys). Default: OpenClaw's config
    /// (OPENCLAW_CONFIG_PATH, else ~/.openclaw/openclaw.json) when present.
    #[arg(long, global = true, env = "MEMORY_CONFIG")]
    pub(crate) config: Option<PathBuf>,
    /// Where indexes are kept. Default: $XDG_STATE_HOME/memory-rs or ~/.local/state/memory-rs.
    #[arg(long, global = true, env = "MEMORY_STATE_DIR")]
    pub(crate) state_dir: Option<PathBuf>,
    /// Agent id: each agent has its own index.
    #[arg(long, global = true, default_value = "main", env = "MEMORY_AGENT")]
    pub(crate) agent: String,
    /// Answer here even when a shared server (`memory server start`) runs for this state folder.
    #[arg(long, global = true, env = "MEMORY_NO_SERVER", value_parser = clap::builder::BoolishValueParser::new())]
    pub(crate) no_server: bool,
    /// More log output (-v info, -vv debug). RUST_LOG overrides.
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    pub(crate) verbose: u8,
    #[command(subcommand)]
    pub(crate) command: Command,
}

/// What to search for and within what: the flags `search` and `explain` share.
#[derive(Args, Debug)]
pub(crate) struct SearchArgs {
    pub(crate) query: String,
    #[arg(long)]
    pub(crate) max_results: Option<usize>,
    #[arg(long)]
    pub(crate) min_score: Option<f64>,
    /// Search only this source (`memory` or `sessions`); repeat for several. Default: all configured.
    #[arg(long = "source", value_parser = parse_source)]
    pub(crate) sources: Vec<memory_core::Source>,
    /// An active repository key (e.g. `github.com/org/repo`; repeat, most recent first, at most 4): entries
    /// tagged `<!-- project: key -->` of an active repository rank higher, those of another lower.
    #[arg(long = "project")]
    pub(crate) projects: Vec<String>,
    /// Only notes dated on or after this day, YYYY-MM-DD (daily logs by their name, other notes by their front
    /// matter `date:` or a dated heading); undated notes are left out.
    #[arg(long, value_name = "DAY")]
    pub(crate) after: Option<String>,
    /// Only notes dated on or before this day, YYYY-MM-DD; undated notes are left out.
    #[arg(long, value_name = "DAY")]
    pub(crate) before: Option<String>,
}

impl SearchArgs {
    /// The request these flags ask.
    pub(crate) fn request(&self) -> memory_core::SearchRequest {
        memory_core::SearchRequest {
            query: self.query.clone(),
            max_results: self.max_results,
            min_score: self.min_score,
            sources: self.sources.clone(),
            active_project_keys: self.projects.clone(),
            after: self.after.clone(),
            before: self.before.clone(),
            ..Default::default()
        }
    }
}

#[derive(Subcommand, Debug)]
pub(crate) enum Command {
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
        #[command(flatten)]
        search: SearchArgs,
        #[arg(long)]
        json: bool,
    },
    /// Why a search answers what it does: how the query was read, the weights of its legs, and for each of the
    /// first hits every factor that placed it (keyword and vector scores, recency, time, importance, project,
    /// reranker, the minScore cut) and the lines its snippet shows. With --path, where that note is and why.
    Explain {
        #[command(flatten)]
        search: SearchArgs,
        /// A memory file to account for (workspace-relative or absolute): not a memory file, skipped and why, not
        /// indexed, its rank, cut by minScore, or why no leg brought it.
        #[arg(long, value_name = "FILE")]
        path: Option<String>,
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
    /// Print the manual page memory(1), generated from these definitions (roff); with --out-dir, write memory.1
    /// and one page per subcommand (memory-search.1, ...) there instead. For packagers: hidden from the help.
    #[command(hide = true, after_help = "Examples:\n  memory man | man -l -\n  memory man --out-dir /usr/local/share/man/man1")]
    Man {
        /// Write memory.1 and memory-<subcommand>.1 into this folder (created if missing).
        #[arg(long)]
        out_dir: Option<PathBuf>,
    },
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

pub(crate) const EXAMPLES: &str = "Examples:
  memory search \"where does the gateway run?\"
  memory --workspace ~/agent index
  memory get memory/2026-11-29.md --from 10 --lines 20
  memory status --deep
  memory explain \"what did we decide yesterday?\" --path memory/notes/importer.md
  memory doctor                        # what works, what does not, and the fix
  memory watch
  memory serve --allow-append          # MCP server on stdio
  memory serve --http 127.0.0.1:8765   # MCP over HTTP (bearer token in the state folder)
  memory server start                  # a shared server: one-shot commands answer in milliseconds
  memory append \"Alice prefers Tuesday meetings\"
  memory openclaw install              # OpenClaw agents search with this engine";

pub(crate) fn parse_source(s: &str) -> Result<memory_core::Source, String> {
    memory_core::Source::parse(s).ok_or_else(|| format!("unknown source `{s}` (memory or sessions)"))
}
