//! The engines compared, each as the commands a user would run: memory-rs's `memory` binary (keyword-only) and
//! the bench harness (memory-rs hybrid with the seeded embedder), QMD's CLI, OpenClaw's CLI. Every tool gets its
//! own HOME/state/XDG folders inside the run's temporary folder, and runs without the host's CI variable.

use std::path::{Path, PathBuf};
use std::process::Command;

/// How the reference tools are found (paths printed by the setup scripts).
#[derive(Debug, Clone)]
pub struct NodeProgram {
    pub node: PathBuf,
    pub entry: PathBuf,
}

#[derive(Debug, Clone)]
pub enum Tool {
    /// The `memory` binary, keyword-only (`provider: "none"`).
    Memory {
        bin: PathBuf,
    },
    /// The same binary and settings with the shared server running (`memory server start`) before the
    /// searches: each `memory search` is still its own process, answered by the server.
    MemoryServer {
        bin: PathBuf,
    },
    /// memory-rs hybrid (vector + keyword) with the seeded embedder, through `memory-bench harness`.
    MemoryHybrid {
        bench: PathBuf,
    },
    Qmd(NodeProgram),
    /// OpenClaw's CLI, plus scripts/bench/openclaw-search.mjs for its in-process latency.
    OpenClaw {
        program: NodeProgram,
        driver: PathBuf,
    },
}

impl Tool {
    pub fn engine(&self) -> &'static str {
        match self {
            Tool::Memory { .. } | Tool::MemoryServer { .. } | Tool::MemoryHybrid { .. } => "memory-rs",
            Tool::Qmd(_) => "QMD",
            Tool::OpenClaw { .. } => "OpenClaw",
        }
    }

    pub fn mode(&self) -> &'static str {
        match self {
            Tool::MemoryHybrid { .. } => "hybrid",
            Tool::MemoryServer { .. } => "keyword, server",
            _ => "keyword",
        }
    }

    pub fn label(&self) -> String {
        format!("{} {}", self.engine(), self.mode())
    }

    /// A fresh per-run home for this tool under `root`.
    pub fn home(&self, root: &Path, notes: usize) -> PathBuf {
        let mode: String = self.mode().chars().filter(char::is_ascii_alphanumeric).collect();
        root.join(format!("{}-{mode}-{notes}", self.engine().to_lowercase()))
    }

    /// Prepare the tool's home (config files).
    pub fn prepare(&self, home: &Path, ws: &Path) -> std::io::Result<()> {
        std::fs::create_dir_all(home.join("home"))?;
        match self {
            Tool::Memory { .. } | Tool::MemoryServer { .. } => {
                std::fs::write(home.join("memory.json5"), r#"{"memory":{"search":{"provider":"none"}}}"#)
            }
            Tool::OpenClaw { .. } => {
                let cfg = serde_json::json!({
                    "agents": {"defaults": {"workspace": ws}},
                    "memory": {"search": {"provider": "none"}}
                });
                std::fs::write(home.join("openclaw.json"), cfg.to_string())
            }
            _ => Ok(()),
        }
    }

    fn base(&self, home: &Path, ws: &Path) -> Command {
        match self {
            Tool::Memory { bin } | Tool::MemoryServer { bin } => {
                let mut c = Command::new(bin);
                c.arg("--workspace").arg(ws).arg("--state-dir").arg(home.join("state")).arg("--config").arg(home.join("memory.json5"));
                isolated(c, home)
            }
            Tool::MemoryHybrid { bench } => harness(bench, "hybrid", home, ws),
            Tool::Qmd(p) | Tool::OpenClaw { program: p, .. } => {
                let mut c = Command::new(&p.node);
                c.arg(&p.entry);
                isolated(c, home)
            }
        }
    }

    /// First index of an empty state.
    pub fn cold_index(&self, home: &Path, ws: &Path) -> Command {
        let mut c = self.base(home, ws);
        match self {
            Tool::Memory { .. } | Tool::MemoryServer { .. } => c.args(["index", "--json"]),
            Tool::MemoryHybrid { .. } => c.arg("index"),
            Tool::Qmd(_) => c.args(["collection", "add"]).arg(ws).args(["--name", "bench", "--mask", "**/*.md"]),
            Tool::OpenClaw { .. } => c.args(["memory", "index"]),
        };
        c
    }

    /// Bring an existing index up to date (nothing changed, or a few files).
    pub fn reindex(&self, home: &Path, ws: &Path) -> Command {
        let mut c = self.base(home, ws);
        match self {
            Tool::Memory { .. } | Tool::MemoryServer { .. } => c.args(["index", "--json"]),
            Tool::MemoryHybrid { .. } => c.arg("index"),
            Tool::Qmd(_) => c.arg("update"),
            Tool::OpenClaw { .. } => c.args(["memory", "index"]),
        };
        c
    }

    /// One search as its own process, the way an agent's tool call or a user's shell runs it.
    pub fn search(&self, home: &Path, ws: &Path, query: &str, max_results: usize) -> Command {
        let mut c = self.base(home, ws);
        let n = max_results.to_string();
        match self {
            Tool::Memory { .. } | Tool::MemoryServer { .. } => c.args(["search", query, "--json", "--max-results", &n]),
            Tool::MemoryHybrid { .. } => c.args(["search", query, "--max-results", &n]),
            Tool::Qmd(_) => c.args(["search", query, "--json", "-n", &n, "-c", "bench"]),
            Tool::OpenClaw { .. } => c.args(["memory", "search", "--json", "--max-results", &n, query]),
        };
        c
    }

    /// A process that opens the engine once and answers one query per stdin line with a JSON line
    /// `{"query","ms","paths":[{"path",...}]}`; `None` when the tool has no such entry point (QMD's CLI).
    pub fn in_process(&self, home: &Path, ws: &Path, max_results: usize) -> Option<Command> {
        let n = max_results.to_string();
        match self {
            Tool::Memory { .. } => {
                // The harness opens the same index the binary wrote (same workspace, state and config).
                let bench = std::env::current_exe().ok()?;
                let mut c = harness(&bench, "keyword", home, ws);
                c.args(["search-stdin", "--max-results", &n]);
                Some(c)
            }
            Tool::MemoryHybrid { .. } => {
                let mut c = self.base(home, ws);
                c.args(["search-stdin", "--max-results", &n]);
                Some(c)
            }
            // The server's engine answers in-process exactly as the keyword row's does.
            Tool::Qmd(_) | Tool::MemoryServer { .. } => None,
            Tool::OpenClaw { program, driver } => {
                // The driver takes OpenClaw's package folder (the entry script sits at its root).
                let pkg = program.entry.parent().unwrap_or(Path::new("."));
                let mut c = Command::new(&program.node);
                c.arg(driver).arg(pkg).arg(&n);
                Some(isolated(c, home))
            }
        }
    }

    /// What runs before the whole-process searches and after them (the shared server's start and stop).
    pub fn around_searches(&self, home: &Path, ws: &Path) -> Option<(Command, Command)> {
        let Tool::MemoryServer { .. } = self else { return None };
        let (mut start, mut stop) = (self.base(home, ws), self.base(home, ws));
        start.args(["server", "start", "--idle-timeout", "3600"]);
        stop.args(["server", "stop"]);
        Some((start, stop))
    }

    /// Where the tool keeps its index, for the size on disk.
    pub fn index_dir(&self, home: &Path) -> PathBuf {
        match self {
            Tool::Qmd(_) => home.join("cache"),
            _ => home.join("state"),
        }
    }

    /// The file stem of each hit in a tool's whole-process JSON answer, in rank order.
    pub fn parse_cli_hits(&self, stdout: &str) -> Result<Vec<String>, String> {
        let v: serde_json::Value = serde_json::from_str(stdout.trim()).map_err(|e| format!("unparsable output: {e}"))?;
        let hits = match self {
            Tool::Qmd(_) => v.as_array().cloned(),
            _ => v["results"].as_array().cloned(),
        }
        .ok_or("no result list in the output")?;
        let field = if matches!(self, Tool::Qmd(_)) { "file" } else { "path" };
        Ok(hits.iter().filter_map(|h| h[field].as_str()).map(stem).collect())
    }
}

/// `memory/cranfield/123.md`, `qmd://bench/memory/cranfield/123.md` -> `123`.
pub fn stem(path: &str) -> String {
    let name = path.rsplit('/').next().unwrap_or(path);
    name.strip_suffix(".md").unwrap_or(name).to_string()
}

/// `memory-bench harness --mode <mode>` on this workspace and the tool's state folder.
fn harness(bench: &Path, mode: &str, home: &Path, ws: &Path) -> Command {
    let mut c = Command::new(bench);
    c.args(["harness", "--mode", mode, "--workspace"]).arg(ws).arg("--state-dir").arg(home.join("state"));
    isolated(c, home)
}

/// Every folder a tool might write to points into its own home; the host's CI variable is dropped (QMD
/// disables model operations under CI=true).
fn isolated(mut c: Command, home: &Path) -> Command {
    c.current_dir(home)
        .env_remove("CI")
        .env("HOME", home.join("home"))
        .env("XDG_CONFIG_HOME", home.join("config"))
        .env("XDG_CACHE_HOME", home.join("cache"))
        .env("XDG_STATE_HOME", home.join("xdg-state"))
        .env("OPENCLAW_STATE_DIR", home.join("state"))
        .env("OPENCLAW_CONFIG_PATH", home.join("openclaw.json"))
        .env("RUST_LOG", "error")
        .env("NO_COLOR", "1");
    c
}
