//! The commands that hold the engine (`watch`, `serve`, `embed-pending`) or delete it (`reset`), run on a
//! runtime this process keeps until they end.

use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::bail;
use memory_core::MemoryBackend;

use crate::cli::{Cli, Command};
use crate::engine::{default_state_dir, open, resolve, resolve_at, Opened, ResolveArgs, Resolved};
use crate::{backlog, http, progress, serve, unopened, watch};

pub(crate) async fn run(cli: Cli) -> anyhow::Result<()> {
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
pub(crate) struct UnopenedArgs {
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
pub(crate) async fn serve_unopened(
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
pub(crate) async fn serve_mcp(
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
pub(crate) async fn run_command(cli: &Cli, opened: &Opened) -> anyhow::Result<()> {
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

/// Watch what discovery indexes. `serving`: the first sync runs in the background (the server answers at once).
pub(crate) async fn start_watch(opened: &Opened, serving: bool, on_sync: watch::OnSync) -> anyhow::Result<watch::WatchHandle> {
    let search = &opened.config.memory.search;
    let targets = watch::WatchTargets::of(&opened.space, search);
    let options = watch::WatchOptions { initial_sync_in_background: serving, ..watch::WatchOptions::from_config(&search.sync) };
    watch::spawn(opened.engine.clone(), targets, options, on_sync).await
}

pub(crate) async fn run_watch(opened: &Opened, json: bool) -> anyhow::Result<()> {
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
    StopSignal::listen()?.received().await;
    handle.stop().await;
    Ok(())
}

/// What ends a long-running command (`watch`, `serve --http`, the shared server) gracefully: Ctrl-C, and on Unix
/// SIGTERM too (what `kill` and service managers send). Listening starts at [`StopSignal::listen`], so a signal
/// that comes before the first wait is not lost.
pub(crate) struct StopSignal {
    #[cfg(unix)]
    term: tokio::signal::unix::Signal,
}

impl StopSignal {
    #[cfg(unix)]
    pub(crate) fn listen() -> std::io::Result<StopSignal> {
        Ok(StopSignal { term: tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())? })
    }

    /// Elsewhere Ctrl-C alone.
    #[cfg(not(unix))]
    #[allow(clippy::unnecessary_wraps, reason = "the same signature as on Unix, where listening can fail")]
    pub(crate) fn listen() -> std::io::Result<StopSignal> {
        Ok(StopSignal {})
    }

    /// Until a stop signal comes (at once if Ctrl-C cannot be listened for). Cancel-safe: usable in `select!`.
    pub(crate) async fn received(&mut self) {
        #[cfg(unix)]
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = self.term.recv() => {}
        }
        #[cfg(not(unix))]
        let _ = tokio::signal::ctrl_c().await;
    }
}
