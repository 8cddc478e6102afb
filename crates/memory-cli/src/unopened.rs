//! `memory serve` when the engine cannot open: the server starts all the same, so the agent keeps its memory
//! tools and reads why they do not answer, instead of finding them gone.
//!
//! Why: an MCP server that exits before its handshake takes every tool with it, `memory_get` of the agent's own
//! notes included, and the agent cannot tell the user what is wrong (a local model folder deleted with a cache,
//! a state disk gone read-only, an index another process holds). OpenClaw's own memory tools answer `disabled`
//! with the error in such a case. Here every search answers with the exact error (the config key and cause),
//! `memory_get` still reads the files (it needs no index), and the engine is opened again at most every
//! [`RETRY`]: once the cause is fixed the next call answers, without restarting the client.

use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use memory_core::discovery::MemoryRoots;
use memory_core::{
    Capabilities, GetRequest, GetResponse, MemoryBackend, MemoryError, RecallRequest, RecallResponse, Result, SearchRequest, SearchResponse, Status,
    SyncOptions, SyncReport,
};
use tokio::sync::Mutex;
use tracing::{info, warn};

/// How long a failed open stands before a call tries again.
pub const RETRY: Duration = Duration::from_secs(10);

/// Opens the engine again (the same resolution and open as at start).
pub type Reopen = Box<dyn Fn() -> std::pin::Pin<Box<dyn std::future::Future<Output = anyhow::Result<Arc<dyn MemoryBackend>>> + Send>> + Send + Sync>;

/// The files `memory_get` reads without an engine, by the memory roots' rule alone (no state folder, no index): for
/// the builtin and LanceDB engines, which read them so themselves. `memory get` reads through it without opening
/// the index, and an engine that cannot open still answers `memory_get` with it.
pub struct Reader {
    roots: MemoryRoots,
    max_file_bytes: u64,
}

impl Reader {
    /// `None` for an engine that must answer reads itself (QMD's collections, plugins).
    pub fn of(workspace: &std::path::Path, config: &memory_core::Config) -> Option<Reader> {
        let search = &config.memory.search;
        matches!(config.memory.backend.as_str(), "builtin" | "lancedb")
            .then(|| Reader { roots: MemoryRoots::for_search(workspace.to_path_buf(), search), max_file_bytes: search.max_file_bytes })
    }

    /// The read; `None` for a `qmd://` path (QMD's own).
    pub fn read(&self, request: &GetRequest) -> Option<Result<GetResponse>> {
        (!request.path.trim_start().starts_with("qmd://")).then(|| memory_core::access::read(&self.roots, request, self.max_file_bytes))
    }
}

enum State {
    Open(Arc<dyn MemoryBackend>),
    Failed { why: String, retry_at: Instant },
}

/// An engine that could not open, opened again on use (see the module docs).
pub struct Reopening {
    name: String,
    state: Mutex<State>,
    reopen: Reopen,
    reader: Option<Reader>,
}

impl Reopening {
    pub fn new(name: String, error: &anyhow::Error, reopen: Reopen, reader: Option<Reader>) -> Reopening {
        let why = said_once(error);
        warn!(engine = %name, error = %why, "the memory engine cannot open; serving anyway: searches say why, memory_get reads the files, the engine is opened again on use");
        Reopening { name, state: Mutex::new(State::Failed { why, retry_at: Instant::now() + RETRY }), reopen, reader }
    }

    /// The engine, opening it again when the last failure is older than [`RETRY`]; else why it is not open.
    async fn engine(&self) -> Result<Arc<dyn MemoryBackend>> {
        let mut state = self.state.lock().await;
        if let State::Failed { retry_at, .. } = &*state {
            if Instant::now() >= *retry_at {
                match (self.reopen)().await {
                    Ok(engine) => {
                        info!(engine = %self.name, "the memory engine opened");
                        *state = State::Open(engine);
                    }
                    Err(e) => *state = State::Failed { why: said_once(&e), retry_at: Instant::now() + RETRY },
                }
            }
        }
        match &*state {
            State::Open(engine) => Ok(engine.clone()),
            State::Failed { why, .. } => Err(MemoryError::Unavailable(format!(
                "the memory engine cannot open: {why} (memory_get still reads the files; the engine is tried again every {} s)",
                RETRY.as_secs()
            ))),
        }
    }
}

/// An error and its causes, each said once: an error whose message already ends with its cause's (an I/O error's
/// `context: source`) does not repeat it.
fn said_once(error: &anyhow::Error) -> String {
    let mut out = String::new();
    for cause in error.chain() {
        let text = cause.to_string();
        if out.ends_with(&text) {
            continue;
        }
        if !out.is_empty() {
            out.push_str(": ");
        }
        out.push_str(&text);
    }
    out
}

#[async_trait]
impl MemoryBackend for Reopening {
    fn name(&self) -> &str {
        &self.name
    }

    fn capabilities(&self) -> Capabilities {
        match self.state.try_lock().as_deref() {
            Ok(State::Open(engine)) => engine.capabilities(),
            _ => Capabilities::default(),
        }
    }

    async fn search(&self, request: &SearchRequest) -> Result<SearchResponse> {
        self.engine().await?.search(request).await
    }

    async fn recall(&self, request: &RecallRequest) -> Result<RecallResponse> {
        self.engine().await?.recall(request).await
    }

    async fn get(&self, request: &GetRequest) -> Result<GetResponse> {
        match self.engine().await {
            Ok(engine) => engine.get(request).await,
            Err(e) => self.reader.as_ref().and_then(|r| r.read(request)).unwrap_or(Err(e)),
        }
    }

    async fn sync(&self, options: SyncOptions) -> Result<SyncReport> {
        self.engine().await?.sync(options).await
    }

    async fn status(&self) -> Result<Status> {
        self.engine().await?.status().await
    }

    async fn reset(&self) -> Result<()> {
        self.engine().await?.reset().await
    }

    async fn verify(&self) -> Result<Option<String>> {
        self.engine().await?.verify().await
    }

    fn notify_changed(&self, paths: &[std::path::PathBuf]) {
        if let Ok(State::Open(engine)) = self.state.try_lock().as_deref() {
            engine.notify_changed(paths);
        }
    }

    async fn close(&self) -> Result<()> {
        match &*self.state.lock().await {
            State::Open(engine) => engine.close().await,
            State::Failed { .. } => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::said_once;

    #[test]
    fn a_cause_already_in_the_message_is_said_once() {
        let io = std::io::Error::new(std::io::ErrorKind::ReadOnlyFilesystem, "Read-only file system (os error 30)");
        let e = anyhow::Error::new(memory_core::MemoryError::Io { context: "cannot create index folder /s".into(), source: io });
        assert_eq!(said_once(&e), "cannot create index folder /s: Read-only file system (os error 30)");
        let e = anyhow::anyhow!("model folder /m not found").context("cannot open the engine");
        assert_eq!(said_once(&e), "cannot open the engine: model folder /m not found");
    }
}
