//! What a command works on: the workspace and config resolved from the flags (or from what a client sent a
//! shared server), and the engine opened on them. One resolution and one open for the CLI's commands, `memory
//! serve`'s reopening and the shared server's engines.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{bail, Context};
use memory_core::registry::OpenContext;
use memory_core::space::AgentSpace;
use memory_core::{Config, GetRequest, MemoryBackend};

use crate::cli::{Cli, Command};
use crate::{openclaw, progress, server, unopened};

pub(crate) use memory_host::default_state_dir;

/// The engine and what the host resolved to open it.
pub(crate) struct Opened {
    pub(crate) engine: Arc<dyn MemoryBackend>,
    /// Where the agent's memory lives, as the engine was given it (the watcher and `append` ask it too).
    pub(crate) space: Arc<AgentSpace>,
    pub(crate) config: Arc<Config>,
    pub(crate) config_path: Option<PathBuf>,
    pub(crate) workspace_from: openclaw::WorkspaceFrom,
    /// Why embeddings do not answer as configured (shown by `status`).
    pub(crate) provider_note: Option<String>,
    /// The second stage the engine was given (`status` describes it and `--deep` tries it).
    pub(crate) reranker: Option<Arc<dyn memory_core::rerank::Reranker>>,
}

/// The workspace and config a command works on, before any engine is opened.
pub(crate) struct Resolved {
    pub(crate) host: memory_host::Host,
    pub(crate) workspace: PathBuf,
    pub(crate) workspace_from: openclaw::WorkspaceFrom,
    pub(crate) config: Config,
    pub(crate) config_path: Option<PathBuf>,
    /// Names the config's content: a shared server keeps one engine per workspace, agent and config content.
    pub(crate) config_hash: String,
}

/// What a command resolves from: the flags, or what a client sent a shared server.
pub(crate) struct ResolveArgs<'a> {
    pub(crate) config_path: Option<PathBuf>,
    pub(crate) workspace: Option<&'a std::path::Path>,
    pub(crate) agent: &'a str,
    pub(crate) is_status: bool,
}

pub(crate) fn resolve(cli: &Cli) -> anyhow::Result<Resolved> {
    let config_path = match &cli.config {
        Some(p) => Some(p.clone()),
        None => openclaw::config_path()?,
    };
    let is_status = matches!(cli.command, Command::Status { .. });
    resolve_at(ResolveArgs { config_path, workspace: cli.workspace.as_deref(), agent: &cli.agent, is_status })
}

pub(crate) fn resolve_at(args: ResolveArgs<'_>) -> anyhow::Result<Resolved> {
    let ResolveArgs { config_path, workspace, agent, is_status } = args;
    // Read once: the workspace probe and the config use the same value.
    let config_json = config_path.as_deref().map(openclaw::read_json).transpose()?;
    let config_hash = server::protocol::content_hash(config_json.as_ref());
    let (workspace, workspace_from) = openclaw::resolve_workspace(workspace, config_json.as_ref(), agent)?;
    if !workspace.is_dir() {
        bail!("workspace {} is not a folder", workspace.display());
    }
    let workspace = memory_core::paths::canonical(&workspace).with_context(|| format!("cannot resolve {}", workspace.display()))?;
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
pub(crate) fn get_without_index(resolved: &Resolved, request: &GetRequest) -> Option<memory_core::Result<memory_core::GetResponse>> {
    unopened::Reader::of(&resolved.workspace, &resolved.config)?.read(request)
}

/// Open the engine for `agent` (the one open logic: the CLI's commands and the shared server's engines).
pub(crate) async fn open(resolved: Resolved, state_dir: PathBuf, agent: &str, is_status: bool, progress: bool) -> anyhow::Result<Opened> {
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
