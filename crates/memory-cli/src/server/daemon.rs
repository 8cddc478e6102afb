//! The shared server: a Unix socket in the state folder (mode 0600, connections from this user only), one engine
//! per (workspace, how it was chosen, agent, config file and content, status or not), opened on first use with
//! the CLI's own open logic and closed when idle; the whole server exits when unused for its idle timeout.
//!
//! Each connection: one request line (at most [`MAX_REQUEST_BYTES`], read within [`READ_REQUEST_WAIT`]), then
//! `accepted` at once, then the answer. Input that is not a request gets a `refused` line, never a panic.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::{Notify, OnceCell};
use tracing::{debug, info, warn};

use super::protocol::{build_identity, rss_bytes, EngineInfo, Envelope, Paths, Reply, Request, ServerInfo, MAX_REQUEST_BYTES, PROTOCOL};
use crate::engine::{open, resolve_at, Opened, ResolveArgs};
use crate::job::run_job;
use crate::openclaw::WorkspaceFrom;

/// How long a connection may take to send its request line.
const READ_REQUEST_WAIT: Duration = Duration::from_secs(5);

/// How long shutdown waits for answers in progress.
const DRAIN_WAIT: Duration = Duration::from_secs(10);

pub struct Options {
    pub idle_timeout: Duration,
    pub engine_idle: Duration,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct EngineKey {
    workspace: PathBuf,
    workspace_from: WorkspaceFrom,
    agent: String,
    config_path: Option<PathBuf>,
    config_hash: String,
    /// `status` opens an engine that tolerates a half-set-up provider; searches never use that one.
    for_status: bool,
}

struct Slot {
    opened: OnceCell<Arc<Opened>>,
    last_used: Mutex<Instant>,
}

struct Server {
    state_dir: PathBuf,
    identity: String,
    socket: PathBuf,
    options: Options,
    started: Instant,
    engines: Mutex<HashMap<EngineKey, Arc<Slot>>>,
    requests: AtomicU64,
    in_flight: AtomicU64,
    last_activity: Mutex<Instant>,
    shutdown: Notify,
}

/// Serve on `listener` until stopped, idle, or signalled; then close every engine.
pub async fn serve(listener: UnixListener, state_dir: PathBuf, options: Options) -> anyhow::Result<()> {
    let paths = Paths::new(&state_dir);
    let server = Arc::new(Server {
        state_dir,
        identity: build_identity(),
        socket: paths.socket.clone(),
        options,
        started: Instant::now(),
        engines: Mutex::new(HashMap::new()),
        requests: AtomicU64::new(0),
        in_flight: AtomicU64::new(0),
        last_activity: Mutex::new(Instant::now()),
        shutdown: Notify::new(),
    });
    info!(socket = %paths.socket.display(), version = %server.identity, "shared server listening");
    let reaper = tokio::spawn(reap(server.clone()));
    let mut stop = crate::long_running::StopSignal::listen()?;
    // SAFETY: geteuid(2) cannot fail and touches no memory.
    let my_uid = unsafe { libc::geteuid() };
    loop {
        tokio::select! {
            conn = listener.accept() => match conn {
                Ok((stream, _)) => {
                    // The socket is 0600 already; the peer's uid is checked as well (root could connect anyway).
                    match stream.peer_cred() {
                        Ok(cred) if cred.uid() == my_uid => {}
                        Ok(cred) => {
                            warn!(uid = cred.uid(), "connection from another user refused");
                            continue;
                        }
                        Err(e) => {
                            warn!(error = %e, "cannot read the peer's credentials; connection refused");
                            continue;
                        }
                    }
                    let server = server.clone();
                    tokio::spawn(async move { server.connection(stream).await });
                }
                Err(e) => {
                    warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            },
            _ = server.shutdown.notified() => break,
            () = stop.received() => break,
        }
    }
    info!("shared server stopping");
    reaper.abort();
    drop(listener);
    let deadline = Instant::now() + DRAIN_WAIT;
    while server.in_flight.load(Ordering::SeqCst) > 0 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let slots: Vec<Arc<Slot>> = lock(&server.engines).drain().map(|(_, s)| s).collect();
    for slot in slots {
        if let Some(opened) = slot.opened.get() {
            if let Err(e) = opened.engine.close().await {
                warn!(error = %e, "closing an engine failed");
            }
        }
    }
    Ok(())
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // A panic elsewhere never poisons the server for good: the data is plain (a map, an instant).
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Close engines idle for `engine_idle`; stop the server when nothing happened for `idle_timeout`.
async fn reap(server: Arc<Server>) {
    let tick = Duration::from_millis(500).min(server.options.engine_idle.max(Duration::from_millis(100)));
    loop {
        tokio::time::sleep(tick).await;
        let idle: Vec<(EngineKey, Arc<Slot>)> = {
            let mut engines = lock(&server.engines);
            let keys: Vec<EngineKey> = engines
                .iter()
                // Only the map holds it: no request is using it.
                .filter(|(_, s)| Arc::strong_count(s) == 1 && lock(&s.last_used).elapsed() >= server.options.engine_idle)
                .map(|(k, _)| k.clone())
                .collect();
            keys.into_iter().filter_map(|k| engines.remove(&k).map(|s| (k, s))).collect()
        };
        for (key, slot) in idle {
            if let Some(opened) = slot.opened.get() {
                info!(workspace = %key.workspace.display(), agent = %key.agent, "closing an idle engine");
                if let Err(e) = opened.engine.close().await {
                    warn!(error = %e, "closing an idle engine failed");
                }
            }
        }
        let quiet = server.in_flight.load(Ordering::SeqCst) == 0 && lock(&server.last_activity).elapsed() >= server.options.idle_timeout;
        if quiet {
            info!(idle_s = server.options.idle_timeout.as_secs(), "unused for the idle timeout; exiting");
            server.shutdown.notify_one();
            return;
        }
    }
}

/// Counts a connection in flight while it lives.
struct InFlight<'a>(&'a Server);

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Server {
    async fn connection(self: Arc<Self>, stream: UnixStream) {
        self.in_flight.fetch_add(1, Ordering::SeqCst);
        let _in_flight = InFlight(&self);
        let (read, mut write) = stream.into_split();
        let mut reader = BufReader::new(read).take(MAX_REQUEST_BYTES + 1);
        let mut line = Vec::new();
        let read = tokio::time::timeout(READ_REQUEST_WAIT, reader.read_until(b'\n', &mut line)).await;
        let reply = match read {
            Err(_) => Some(self.refused("no request line in time")),
            Ok(Err(e)) => {
                debug!(error = %e, "reading a request failed");
                None
            }
            Ok(Ok(_)) if line.len() as u64 > MAX_REQUEST_BYTES => Some(self.refused(&format!("request over {MAX_REQUEST_BYTES} bytes"))),
            Ok(Ok(_)) => match serde_json::from_slice::<Envelope>(&line) {
                Err(e) => Some(self.refused(&format!("not a request: {e}"))),
                Ok(envelope) => self.request(envelope, &mut write).await,
            },
        };
        if let Some(reply) = reply {
            if let Err(e) = send(&mut write, &reply).await {
                debug!(error = %e, "the client left before the reply");
            }
        }
    }

    fn refused(&self, reason: &str) -> Reply {
        Reply::Refused { reason: reason.to_string(), version: self.identity.clone() }
    }

    /// The reply to send last (`None`: nothing more to send).
    async fn request(&self, envelope: Envelope, write: &mut tokio::net::unix::OwnedWriteHalf) -> Option<Reply> {
        match envelope.request {
            Request::Ping => Some(Reply::Info { info: self.info() }),
            Request::Stop => {
                info!("stop requested");
                self.shutdown.notify_one();
                Some(Reply::Stopping)
            }
            Request::Run { .. } if envelope.protocol != PROTOCOL || envelope.version != self.identity => {
                debug!(client = %envelope.version, "a client of another build; it answers in-process");
                Some(self.refused("another build"))
            }
            Request::Run { workspace, workspace_from, agent, config_path, config_hash, job } => {
                if let Err(e) = send(write, &Reply::Accepted).await {
                    debug!(error = %e, "the client left before the request was taken");
                    return None;
                }
                self.requests.fetch_add(1, Ordering::Relaxed);
                let key = EngineKey { workspace, workspace_from, agent, config_path, config_hash, for_status: job.is_status() };
                let reply = match self.engine(&key).await {
                    Ok((opened, slot)) => {
                        let answer = run_job(&job, &opened).await;
                        if job.may_leave_vectors_waiting() {
                            let target = crate::backlog::Target {
                                workspace: &key.workspace,
                                config_path: key.config_path.as_deref(),
                                state_dir: &self.state_dir,
                                agent: &key.agent,
                            };
                            crate::backlog::start_if_waiting(&opened, &target).await;
                        }
                        // Idle from the end of its last request, not the start.
                        *lock(&slot.last_used) = Instant::now();
                        Reply::Done { answer }
                    }
                    // The client opens it itself and reports the error in its own words.
                    Err(e) => self.refused(&format!("cannot open the engine: {}", crate::one_line(&e))),
                };
                // Only work keeps the server up (`server status` does not).
                *lock(&self.last_activity) = Instant::now();
                Some(reply)
            }
        }
    }

    async fn engine(&self, key: &EngineKey) -> anyhow::Result<(Arc<Opened>, Arc<Slot>)> {
        let slot = lock(&self.engines)
            .entry(key.clone())
            .or_insert_with(|| Arc::new(Slot { opened: OnceCell::new(), last_used: Mutex::new(Instant::now()) }))
            .clone();
        *lock(&slot.last_used) = Instant::now();
        let opened = slot.opened.get_or_try_init(|| self.open_engine(key)).await;
        match opened {
            Ok(o) => Ok((o.clone(), slot.clone())),
            Err(e) => {
                // Not kept: the next request tries again.
                let mut engines = lock(&self.engines);
                if engines.get(key).is_some_and(|s| Arc::ptr_eq(s, &slot) && s.opened.get().is_none()) {
                    engines.remove(key);
                }
                Err(e)
            }
        }
    }

    async fn open_engine(&self, key: &EngineKey) -> anyhow::Result<Arc<Opened>> {
        let mut resolved = resolve_at(ResolveArgs {
            config_path: key.config_path.clone(),
            workspace: Some(&key.workspace),
            agent: &key.agent,
            is_status: key.for_status,
        })?;
        if resolved.config_hash != key.config_hash {
            anyhow::bail!("the config changed between the client's read and the server's");
        }
        // As the client chose it (`status` says how).
        resolved.workspace_from = key.workspace_from;
        info!(workspace = %key.workspace.display(), agent = %key.agent, "opening an engine");
        Ok(Arc::new(open(resolved, self.state_dir.clone(), &key.agent, key.for_status, false).await?))
    }

    fn info(&self) -> ServerInfo {
        let engines = lock(&self.engines)
            .iter()
            .filter(|(_, s)| s.opened.get().is_some())
            .map(|(k, s)| EngineInfo {
                workspace: k.workspace.display().to_string(),
                agent: k.agent.clone(),
                config_path: k.config_path.as_ref().map(|p| p.display().to_string()),
                idle_ms: lock(&s.last_used).elapsed().as_millis() as u64,
            })
            .collect();
        ServerInfo {
            pid: std::process::id(),
            version: self.identity.clone(),
            protocol: PROTOCOL,
            socket: self.socket.display().to_string(),
            uptime_ms: self.started.elapsed().as_millis() as u64,
            requests: self.requests.load(Ordering::Relaxed),
            rss_bytes: rss_bytes(),
            engines,
            idle_timeout_s: self.options.idle_timeout.as_secs(),
            engine_idle_s: self.options.engine_idle.as_secs(),
        }
    }
}

async fn send(write: &mut tokio::net::unix::OwnedWriteHalf, reply: &Reply) -> std::io::Result<()> {
    let mut line = serde_json::to_vec(reply).map_err(std::io::Error::other)?;
    line.push(b'\n');
    write.write_all(&line).await?;
    write.flush().await
}

/// Bind the socket at `path` with mode 0600 from the start (no window where another user could connect).
pub fn bind(path: &Path) -> anyhow::Result<UnixListener> {
    use anyhow::Context;
    use std::os::unix::fs::PermissionsExt;
    // The process's umask is shared by its threads; nothing else creates files at this point of startup.
    // SAFETY: umask(2) cannot fail and touches no memory; the old mask is restored right after the bind.
    let old = unsafe { libc::umask(0o177) };
    let bound = std::os::unix::net::UnixListener::bind(path);
    // SAFETY: as above.
    unsafe { libc::umask(old) };
    let listener = bound.with_context(|| format!("cannot listen on {}", path.display()))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).with_context(|| format!("cannot restrict {}", path.display()))?;
    listener.set_nonblocking(true)?;
    Ok(UnixListener::from_std(listener)?)
}
