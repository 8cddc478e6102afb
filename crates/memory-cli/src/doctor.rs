//! `memory doctor [--deep] [--json]`: one line per check of what a working setup needs (config, workspace, engine
//! and fallback, embedding model, reranker, index, skipped files, shared server, OpenClaw plugin), each OK, WARN
//! or FAIL with what to do; exit status 1 when any check fails. Every check reports and the next one runs: a
//! broken config is a FAIL line, and the checks that need it say they were not run.
//!
//! Never syncs: the index is reported as it is. `--deep` also reads the whole index for damage (as `status
//! --deep`, which repairs it).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use memory_core::registry::OpenContext;
use memory_core::{Config, MemoryBackend, Status};
use serde::Serialize;

use crate::openclaw::{self, WorkspaceFrom};
use crate::server;

/// How long the embedding and reranking probes may take (a model loads from disk, a remote API answers).
const PROBE_WAIT: Duration = Duration::from_secs(30);

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Level {
    Ok,
    Warn,
    Fail,
}

impl Level {
    fn word(self) -> &'static str {
        match self {
            Level::Ok => "OK",
            Level::Warn => "WARN",
            Level::Fail => "FAIL",
        }
    }
}

/// One line of the report.
#[derive(Debug, Clone, Serialize)]
pub struct Check {
    pub check: &'static str,
    pub level: Level,
    pub message: String,
    /// What to do about a WARN or FAIL.
    pub fix: Option<String>,
}

#[derive(Default)]
struct Report {
    checks: Vec<Check>,
}

impl Report {
    fn add(&mut self, check: &'static str, level: Level, message: impl Into<String>, fix: Option<String>) {
        self.checks.push(Check { check, level, message: message.into(), fix });
    }
    fn ok(&mut self, check: &'static str, message: impl Into<String>) {
        self.add(check, Level::Ok, message, None);
    }
    fn warn(&mut self, check: &'static str, message: impl Into<String>, fix: impl Into<String>) {
        self.add(check, Level::Warn, message, Some(fix.into()));
    }
    fn fail(&mut self, check: &'static str, message: impl Into<String>, fix: impl Into<String>) {
        self.add(check, Level::Fail, message, Some(fix.into()));
    }
    /// A check that needs what an earlier one could not give.
    fn not_run(&mut self, check: &'static str, because: &str) {
        self.add(check, Level::Warn, format!("not checked ({because})"), Some("fix the FAIL above, then run `memory doctor` again".into()));
    }
}

/// What the doctor is asked about: the command line's flags.
pub struct Args<'a> {
    pub config: Option<&'a Path>,
    pub workspace: Option<&'a Path>,
    pub state_dir: PathBuf,
    pub agent: &'a str,
    pub deep: bool,
}

/// Run every check and print them; `Ok(true)` when none failed.
pub fn run(args: &Args<'_>, json: bool) -> anyhow::Result<bool> {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let checks = rt.block_on(checks(args));
    let mut out = std::io::stdout().lock();
    print(&mut out, &checks, json)?;
    Ok(!checks.iter().any(|c| c.level == Level::Fail))
}

pub fn print(out: &mut dyn std::io::Write, checks: &[Check], json: bool) -> anyhow::Result<()> {
    if json {
        serde_json::to_writer_pretty(&mut *out, checks)?;
        writeln!(out)?;
        return Ok(());
    }
    for c in checks {
        let fix = c.fix.as_deref().map(|f| format!("  fix: {f}")).unwrap_or_default();
        writeln!(out, "{:<4}  {}: {}{fix}", c.level.word(), c.check, c.message.replace('\n', " "))?;
    }
    Ok(())
}

async fn checks(args: &Args<'_>) -> Vec<Check> {
    let mut r = Report::default();
    let host = memory_host::Host::new();
    let (config, config_json) = check_config(&mut r, &host, args);
    let workspace = check_workspace(&mut r, args, config_json.as_ref(), config.as_ref());
    // The model and the reranker need the config only: checked even when the workspace is wrong.
    let config = config.map(Arc::new);
    let (embedder, reranker) = match &config {
        Some(config) => (check_embeddings(&mut r, config).await, check_reranker(&mut r, config).await),
        None => {
            r.not_run("embeddings", "the config does not load");
            r.not_run("reranker", "the config does not load");
            (None, None)
        }
    };
    let opened = match (config, &workspace) {
        (Some(config), Some(ws)) => open_engine(&mut r, &host, config, ws, args, embedder, reranker).await,
        (config, _) => {
            let because = if config.is_none() { "the config does not load" } else { "no workspace" };
            for c in ["engine", "fallback", "index", "skipped"] {
                r.not_run(c, because);
            }
            None
        }
    };
    if let Some(engine) = opened {
        check_index(&mut r, engine.as_ref(), args.deep).await;
        if let Err(e) = engine.close().await {
            tracing::debug!(error = %e, "closing the engine failed");
        }
    }
    check_server(&mut r, &args.state_dir);
    check_openclaw(&mut r);
    r.checks
}

/// The config file: found, parsed, its keys known and its values valid (the same load every command does).
fn check_config(r: &mut Report, host: &memory_host::Host, args: &Args<'_>) -> (Option<Config>, Option<serde_json::Value>) {
    let path = match args.config {
        Some(p) => Some(p.to_path_buf()),
        None => match openclaw::config_path() {
            Ok(p) => p,
            Err(e) => {
                r.fail("config", format!("{e:#}"), "point OPENCLAW_CONFIG_PATH at the config file, or unset it");
                return (None, None);
            }
        },
    };
    let Some(path) = path else {
        r.ok("config", "no config file: defaults (pass --config or write ~/.openclaw/openclaw.json to change them)");
        return (Some(Config::default()), None);
    };
    let json = match openclaw::read_json(&path) {
        Ok(v) => v,
        Err(e) => {
            r.fail("config", naming(&path, &e), "correct the file (JSON5) at the place named, or pass --config <file>");
            return (None, None);
        }
    };
    let config = match host.config_from_file_value(json.clone(), &path, Some(args.agent)) {
        Ok(c) => c,
        Err(e) => {
            r.fail("config", naming(&path, &e), "correct or remove the key named");
            return (None, Some(json));
        }
    };
    r.ok("config", format!("{} loads", path.display()));
    for w in &config.warnings {
        r.warn("config", format!("{}: {}", w.key, w.message), format!("remove or correct `{}`", w.key));
    }
    if !config.memory.search.enabled {
        r.warn(
            "config",
            format!("memory search is turned off for agent `{}` (memorySearch.enabled: false)", args.agent),
            "set memorySearch.enabled to true for this agent, or use another --agent",
        );
    }
    (Some(config), Some(json))
}

/// `e`, naming the file it is about once.
fn naming(path: &Path, e: &dyn std::fmt::Display) -> String {
    let (shown, e) = (path.display().to_string(), e.to_string());
    if e.contains(&shown) {
        e
    } else {
        format!("{shown}: {e}")
    }
}

/// The workspace: chosen as every command chooses it, a folder, and holding memory files.
fn check_workspace(r: &mut Report, args: &Args<'_>, json: Option<&serde_json::Value>, config: Option<&Config>) -> Option<PathBuf> {
    let (ws, from) = match openclaw::resolve_workspace(args.workspace, json, args.agent) {
        Ok(w) => w,
        Err(e) => {
            r.fail("workspace", format!("{e:#}"), "pass --workspace <folder>");
            return None;
        }
    };
    if !ws.is_dir() {
        r.fail("workspace", format!("{} is not a folder", ws.display()), "pass --workspace <the folder that holds MEMORY.md and memory/>");
        return None;
    }
    let ws = match memory_core::paths::canonical(&ws) {
        Ok(w) => w,
        Err(e) => {
            r.fail("workspace", format!("cannot resolve {}: {e}", ws.display()), "pass --workspace <folder>");
            return None;
        }
    };
    let from = match from {
        WorkspaceFrom::Flag => "--workspace",
        WorkspaceFrom::CurrentFolder => "the current folder",
        WorkspaceFrom::Openclaw => "OpenClaw's agent workspace",
    };
    let default = Config::default();
    let search = &config.unwrap_or(&default).memory.search;
    let files = memory_core::discovery::discover(&memory_core::discovery::MemoryRoots::for_search(&ws, search));
    let bytes: u64 = files.iter().map(|f| f.size).sum();
    if files.is_empty() {
        r.warn(
            "workspace",
            format!("{} (from {from}) holds no memory files", ws.display()),
            "write MEMORY.md or memory/*.md there, or pass --workspace <the agent's workspace>",
        );
    } else {
        r.ok("workspace", format!("{} (from {from}): {} memory files, {:.1} MiB", ws.display(), files.len(), bytes as f64 / (1024.0 * 1024.0)));
    }
    Some(ws)
}

/// The embedding provider: built from the config, and one real embedding (its width and time).
async fn check_embeddings(r: &mut Report, config: &Config) -> Option<Arc<dyn memory_core::embedding::EmbeddingProvider>> {
    let provider = match memory_host::embedder(config) {
        Ok(None) => {
            r.ok("embeddings", "none configured: keyword search only (memory.search.provider sets a model)");
            return None;
        }
        Ok(Some(p)) => p,
        Err(e) => {
            r.fail("embeddings", e.to_string(), "set memory.search.provider / model (and the API key) as docs/providers.md says");
            return None;
        }
    };
    let name = format!("{} {}", provider.id(), provider.model());
    if let Some(why) = provider.unavailable() {
        r.fail("embeddings", format!("{name} cannot be used: {why}"), "put the model where memory.search.local.modelPath says, or correct the path");
        return Some(provider);
    }
    let started = Instant::now();
    match tokio::time::timeout(PROBE_WAIT, provider.embed_query("memory doctor probe")).await {
        Ok(Ok(v)) => {
            let ms = started.elapsed().as_secs_f64() * 1000.0;
            match provider.dimensions() {
                Some(d) if d != v.len() => r.fail(
                    "embeddings",
                    format!("{name} answered {} dimensions; it is configured for {d}", v.len()),
                    "correct the configured dimensions, or the model",
                ),
                _ if v.is_empty() || v.iter().any(|x| !x.is_finite()) => {
                    r.fail("embeddings", format!("{name} answered an empty or non-finite vector"), "use another model");
                }
                _ => r.ok("embeddings", format!("{name}: one embedding, {} dimensions, in {ms:.0} ms", v.len())),
            }
        }
        Ok(Err(e)) => r.fail("embeddings", format!("{name}: {e}"), "check the model or the provider's address and key"),
        Err(_) => r.fail(
            "embeddings",
            format!("{name}: no embedding within {} s", PROBE_WAIT.as_secs()),
            "check that the provider answers (its address, the network)",
        ),
    }
    Some(provider)
}

/// The second stage (`memory.search.query.rerank`): off, or loads and scores one pair.
async fn check_reranker(r: &mut Report, config: &Config) -> Option<Arc<dyn memory_core::rerank::Reranker>> {
    let rr = match memory_host::reranker(config) {
        Ok(None) => {
            r.ok("reranker", "off (memory.search.query.rerank.enabled)");
            return None;
        }
        Ok(Some(rr)) => rr,
        Err(e) => {
            r.fail("reranker", e.to_string(), "correct memory.search.query.rerank");
            return None;
        }
    };
    if let Some(why) = rr.unavailable() {
        r.fail(
            "reranker",
            format!("{} cannot be used: {why}", rr.id()),
            "correct memory.search.query.rerank.modelPath, or turn reranking off (searches answer unreranked meanwhile)",
        );
        return Some(rr);
    }
    let started = Instant::now();
    let passages = ["The memory doctor probe reads this line.".to_string()];
    match rr.score("memory doctor probe", &passages, started + PROBE_WAIT).await {
        Ok(s) if s.len() == 1 && s[0].is_finite() => {
            r.ok("reranker", format!("{}: one pair scored in {:.0} ms", rr.id(), started.elapsed().as_secs_f64() * 1000.0));
        }
        Ok(s) => r.fail("reranker", format!("{}: {} scores for one pair", rr.id(), s.len()), "use another reranking model"),
        Err(e) => r.fail("reranker", format!("{}: {e}", rr.id()), "check the model folder, or turn reranking off"),
    }
    Some(rr)
}

/// Open the configured engine (behind the builtin fallback) with the provider and reranker already checked.
async fn open_engine(
    r: &mut Report,
    host: &memory_host::Host,
    config: Arc<Config>,
    ws: &Path,
    args: &Args<'_>,
    embedder: Option<Arc<dyn memory_core::embedding::EmbeddingProvider>>,
    reranker: Option<Arc<dyn memory_core::rerank::Reranker>>,
) -> Option<Box<dyn MemoryBackend>> {
    let name = config.memory.backend.clone();
    let ctx = OpenContext::new(config, ws, &args.state_dir, args.agent).with_embedder(embedder).with_reranker(reranker);
    match host.registry().open(ctx).await {
        Ok(engine) => Some(engine),
        Err(e) => {
            r.fail("engine", format!("{name}: {e}"), "correct memory.backend and its block, or the state folder (--state-dir)");
            for c in ["fallback", "index", "skipped"] {
                r.not_run(c, "the engine does not open");
            }
            None
        }
    }
}

/// The engine, its fallback, the index's freshness and settings, the files it left out; `deep`: its integrity.
async fn check_index(r: &mut Report, engine: &dyn MemoryBackend, deep: bool) {
    let status = match engine.status().await {
        Ok(s) => s,
        Err(e) => {
            r.fail("engine", format!("{}: {e}", engine.name()), "run `memory status` for more; `memory reset --yes` rebuilds a broken index");
            for c in ["fallback", "index", "skipped"] {
                r.not_run(c, "the engine does not answer");
            }
            return;
        }
    };
    let search = match (status.capabilities.keyword, status.capabilities.vector) {
        (true, true) => "hybrid search",
        (true, false) => "keyword search",
        (false, true) => "vector search",
        _ => "no search",
    };
    match &status.fallback {
        Some(f) => {
            r.fail(
                "engine",
                format!("{} is unavailable: {}", f.from, f.reason),
                format!("correct memory.{} (its program, its settings), or set memory.backend to builtin", f.from),
            );
            r.warn("fallback", format!("{} answers instead ({search})", status.backend), "searches work meanwhile; fix the engine above");
        }
        None => {
            r.ok("engine", format!("{} opens ({search})", status.backend));
            if status.backend == "builtin" {
                r.ok("fallback", "not needed: builtin is the engine");
            } else {
                r.ok("fallback", format!("builtin stands ready should {} fail", status.backend));
            }
        }
    }
    index_line(r, &status);
    if deep {
        let started = Instant::now();
        match engine.verify().await {
            Ok(None) => r.ok("index", format!("read whole, no damage ({:.0} ms)", started.elapsed().as_secs_f64() * 1000.0)),
            Ok(Some(repaired)) => r.warn("index", repaired, "nothing more: it was rebuilt from the memory files"),
            Err(e) => r.fail("index", format!("the integrity check failed: {e}"), "`memory reset --yes`, then `memory index`"),
        }
    }
    skipped_line(r, &status);
}

fn index_line(r: &mut Report, s: &Status) {
    let place = s.index_path.as_deref().map(|p| format!(" at {p}")).unwrap_or_default();
    let Some(last) = s.last_sync_ms else {
        r.warn("index", format!("never built{place}"), "`memory index` (a search also builds it first)");
        return;
    };
    let ago = (memory_core::now_ms() - last).max(0) / 1000;
    let held = format!("{} files, {} chunks{place}, synced {ago} s ago", s.files, s.chunks);
    let mut problems = Vec::new();
    if s.dirty {
        let stale = s.extra.get("staleFiles").and_then(serde_json::Value::as_u64).map_or_else(|| "files".into(), |n| format!("{n} files"));
        problems.push(format!("{stale} changed since the last sync"));
    }
    // The fallback's own warning is the engine line's.
    let fallback_reason = s.fallback.as_ref().map(|f| f.reason.as_str());
    problems.extend(s.warnings.iter().filter(|w| !fallback_reason.is_some_and(|why| w.contains(why))).cloned());
    if problems.is_empty() {
        r.ok("index", format!("fresh: {held}"));
    } else {
        r.warn("index", format!("{held}; {}", problems.join("; ")), "`memory index` (or keep `memory watch` running)");
    }
}

fn skipped_line(r: &mut Report, s: &Status) {
    if s.skipped.is_empty() {
        r.ok("skipped", "no memory file left out by the last sync");
        return;
    }
    let listed: Vec<String> = s.skipped.iter().map(|f| format!("{} ({})", f.path, f.reason)).collect();
    let mut fixes = Vec::new();
    if s.skipped.iter().any(|f| f.reason.contains("limit")) {
        fixes.push("split a file over the limit, or raise memory.search.maxFileBytes");
    }
    if s.skipped.iter().any(|f| f.reason.contains("binary") || f.reason.contains("UTF-8")) {
        fixes.push("convert the file to UTF-8 text, or move it out of the memory folders");
    }
    if s.skipped.iter().any(|f| f.retried) {
        fixes.push("make the file readable by this user");
    }
    if fixes.is_empty() {
        fixes.push("see `memory status`");
    }
    r.warn("skipped", format!("{} files not indexed: {}", s.skipped.len(), listed.join(", ")), fixes.join("; "));
}

/// The shared server of this state folder, found as every one-shot command finds it.
fn check_server(r: &mut Report, state_dir: &Path) {
    if !server::AVAILABLE {
        r.ok("server", "not available on this platform (it needs a Unix socket): each command opens the index itself");
        return;
    }
    if !server::client::present(state_dir) {
        r.ok("server", "not running: each command opens the index itself (`memory server start` shares one)");
        return;
    }
    match server::client::ping(state_dir) {
        Ok(info) if info.version == server::protocol::build_identity() => {
            r.ok("server", format!("running (pid {}), this build; {} engines open", info.pid, info.engines.len()));
        }
        Ok(info) => r.warn(
            "server",
            format!("running (pid {}) but another build ({}): commands answer in-process", info.pid, info.version),
            "`memory server stop`, then `memory server start`",
        ),
        Err(e) => r.warn(
            "server",
            format!("its socket is there but no server answers ({e})"),
            "`memory server status` removes what a stopped server left; `memory server start` starts one",
        ),
    }
}

/// The OpenClaw plugin: when OpenClaw is there, whether its memory slot is served by this engine
/// (`memory openclaw status`).
fn check_openclaw(r: &mut Report) {
    let state = openclaw::state_dir();
    let config = match openclaw::config_path() {
        Ok(c) => c,
        Err(e) => {
            r.fail("openclaw", format!("{e:#}"), "point OPENCLAW_CONFIG_PATH at OpenClaw's config, or unset it");
            return;
        }
    };
    if config.is_none() && !state.as_deref().is_some_and(Path::is_dir) {
        r.ok("openclaw", "OpenClaw not found: no plugin to check");
        return;
    }
    let status = match crate::openclaw_plugin::status() {
        Ok(s) => s,
        Err(e) => {
            r.fail("openclaw", format!("{e:#}"), "correct OpenClaw's config");
            return;
        }
    };
    let strs = |v: &serde_json::Value| -> Vec<String> { v.as_array().into_iter().flatten().filter_map(|s| s.as_str().map(str::to_string)).collect() };
    let problems = strs(&status["problems"]);
    let id = crate::openclaw_plugin::PLUGIN_ID;
    if status["served"] == true {
        r.ok("openclaw", format!("the memory slot is served by {id} (installed at {})", status["installed"].as_str().unwrap_or("?")));
        for w in strs(&status["warnings"]) {
            r.warn("openclaw", w, "`memory openclaw install`");
        }
    } else if status["slot"].as_str() == Some(id) || status["installed"].is_string() {
        // Set up for this engine, but not working.
        r.fail(
            "openclaw",
            format!("{id} does not serve the memory slot: {}", problems.join("; ")),
            "`memory openclaw install`, then restart the gateway",
        );
    } else {
        // Not set up for this engine: what OpenClaw uses instead is enough; `memory openclaw status` says the rest.
        let slot = status["slot"].as_str().map_or("unset (memory-core)".to_string(), |s| format!("`{s}`"));
        let at = status["configPath"].as_str().or(status["stateDir"].as_str()).unwrap_or("?");
        r.warn(
            "openclaw",
            format!("OpenClaw ({at}) does not use {id}: its memory slot is {slot}"),
            "`memory openclaw install` (OpenClaw's agents then search with this engine)",
        );
    }
}
