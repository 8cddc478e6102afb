//! `memory serve --http [ADDR]`: the same MCP tools over the streamable HTTP transport (rmcp's
//! `StreamableHttpService`), at `/mcp`.
//!
//! Safe by default: loopback only unless `--allow-remote`; every request needs `Authorization: Bearer <token>`
//! (401 otherwise) — the token is generated into `<state>/mcp-http.token` (mode 0600 on Unix) or given with
//! `--token-file` / `MEMORY_HTTP_TOKEN`; requests whose `Host` or `Origin` is not the server's own are refused
//! with 403 (DNS rebinding); bodies over `--max-body` bytes are refused (413). No TLS: put a reverse proxy in
//! front for anything beyond this host.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context};
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::{Request, Response, StatusCode};
use memory_core::MemoryBackend;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use tracing::{debug, info, warn};

use crate::serve::MemoryServer;

/// The token file in the state folder.
pub const TOKEN_FILE: &str = "mcp-http.token";

/// The path clients post to.
pub const MCP_PATH: &str = "/mcp";

#[derive(clap::Args, Debug)]
pub struct HttpArgs {
    /// Serve MCP over HTTP (streamable HTTP, at /mcp) on this address instead of stdio. Default address
    /// 127.0.0.1:8765; port 0 picks a free one (printed on stderr).
    #[arg(long, value_name = "ADDR", num_args = 0..=1, default_missing_value = "127.0.0.1:8765")]
    http: Option<SocketAddr>,
    /// A file holding the bearer token clients must send. Default: <state folder>/mcp-http.token, generated
    /// (mode 0600) when missing.
    #[arg(long, value_name = "FILE", requires = "http")]
    token_file: Option<PathBuf>,
    /// Listen on an address other than loopback (anyone who can reach it and holds the token can read this
    /// memory; there is no TLS: put a reverse proxy in front).
    #[arg(long, requires = "http")]
    allow_remote: bool,
    /// A further Host (`name` or `name:port`) clients reach this server by, e.g. a reverse proxy's; requests
    /// naming any other Host or Origin are refused. Repeat for several.
    #[arg(long = "allowed-host", value_name = "HOST", requires = "http")]
    allowed_hosts: Vec<String>,
    /// The largest request body accepted, in bytes.
    #[arg(long, default_value_t = 1 << 20, requires = "http")]
    max_body: usize,
}

pub struct HttpOptions {
    addr: SocketAddr,
    token: String,
    token_source: String,
    allowed_hosts: Vec<String>,
    max_body: usize,
}

impl HttpArgs {
    /// `None`: serve on stdio.
    pub fn to_options(&self, state_dir: &Path) -> anyhow::Result<Option<HttpOptions>> {
        let Some(addr) = self.http else { return Ok(None) };
        if !addr.ip().is_loopback() && !self.allow_remote {
            bail!("{addr} is not a loopback address: pass --allow-remote to listen there (and put TLS in front: a reverse proxy)");
        }
        let (token, token_source) = match (&self.token_file, std::env::var("MEMORY_HTTP_TOKEN").ok().filter(|t| !t.is_empty())) {
            (Some(p), _) => (read_token(p)?, p.display().to_string()),
            (None, Some(t)) => (check_token(t.trim().to_string(), "MEMORY_HTTP_TOKEN")?, "MEMORY_HTTP_TOKEN".to_string()),
            (None, None) => {
                let p = state_dir.join(TOKEN_FILE);
                (token_in_state(&p)?, p.display().to_string())
            }
        };
        Ok(Some(HttpOptions { addr, token, token_source, allowed_hosts: self.allowed_hosts.clone(), max_body: self.max_body }))
    }
}

fn check_token(token: String, from: &str) -> anyhow::Result<String> {
    if token.len() < 16 {
        bail!("the token from {from} is shorter than 16 characters");
    }
    if !token.bytes().all(|b| b.is_ascii_graphic()) {
        bail!("the token from {from} holds characters a header cannot carry");
    }
    Ok(token)
}

/// A token file must be readable by its owner only ([`owner_only`]).
fn read_token(path: &Path) -> anyhow::Result<String> {
    let meta = std::fs::metadata(path).with_context(|| format!("cannot read {}", path.display()))?;
    owner_only::check(path, &meta)?;
    let text = memory_core::bounded::read_text(path, 4096).with_context(|| format!("cannot read {}", path.display()))?;
    check_token(text.trim().to_string(), &path.display().to_string())
}

/// The state folder's token, generated (32 random bytes, hex, readable by its owner only: [`owner_only`]) on
/// first use.
fn token_in_state(path: &Path) -> anyhow::Result<String> {
    use std::io::Write;
    if path.exists() {
        return read_token(path);
    }
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    let mut raw = [0u8; 32];
    getrandom::getrandom(&mut raw).map_err(|e| anyhow::anyhow!("cannot draw random bytes for the token: {e}"))?;
    let token: String = raw.iter().map(|b| format!("{b:02x}")).collect();
    match owner_only::create_new(path) {
        Ok(mut f) => {
            writeln!(f, "{token}").with_context(|| format!("cannot write {}", path.display()))?;
            info!(path = %path.display(), "generated the HTTP bearer token");
            Ok(token)
        }
        // Another server generated it meanwhile: use theirs.
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => read_token(path),
        Err(e) => Err(e).with_context(|| format!("cannot create {}", path.display())),
    }
}

/// Who may read a token file. Unix: its owner only: created with mode 0600, and a token file other users can read
/// is refused. Elsewhere it is created like any file and not checked: on Windows its ACL is inherited from its
/// folder, the state folder, which is private when it is under the user's profile (the default there,
/// `%LOCALAPPDATA%\memory-rs`, is).
#[cfg(unix)]
mod owner_only {
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    use std::path::Path;

    pub(super) fn check(path: &Path, meta: &std::fs::Metadata) -> anyhow::Result<()> {
        if meta.permissions().mode() & 0o077 != 0 {
            anyhow::bail!("{} can be read by other users (mode {:o}); run chmod 600 on it", path.display(), meta.permissions().mode() & 0o777);
        }
        Ok(())
    }

    pub(super) fn create_new(path: &Path) -> std::io::Result<std::fs::File> {
        std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(path)
    }
}

#[cfg(not(unix))]
mod owner_only {
    use std::path::Path;

    #[allow(clippy::unnecessary_wraps, reason = "the same signature as on Unix, where the check can refuse")]
    pub(super) fn check(_path: &Path, _meta: &std::fs::Metadata) -> anyhow::Result<()> {
        Ok(())
    }

    pub(super) fn create_new(path: &Path) -> std::io::Result<std::fs::File> {
        std::fs::OpenOptions::new().write(true).create_new(true).open(path)
    }
}

/// Equal without telling by timing how much of it matched.
fn same_secret(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

fn authorized(req: &Request<hyper::body::Incoming>, token: &str) -> bool {
    let Some(value) = req.headers().get(hyper::header::AUTHORIZATION).and_then(|v| v.to_str().ok()) else { return false };
    let Some((scheme, given)) = value.trim().split_once(' ') else { return false };
    scheme.eq_ignore_ascii_case("bearer") && same_secret(given.trim().as_bytes(), token.as_bytes())
}

type Body = http_body_util::combinators::BoxBody<Bytes, Infallible>;

fn plain(status: StatusCode, text: &str) -> Response<Body> {
    let mut r = Response::new(Full::new(Bytes::from(text.to_string())).boxed());
    *r.status_mut() = status;
    r
}

/// The Host authorities this server answers to: its own address (and `localhost` when on loopback), plus the
/// configured ones.
fn own_hosts(addr: SocketAddr, extra: &[String]) -> Vec<String> {
    let port = addr.port();
    let mut hosts = Vec::new();
    if addr.ip().is_loopback() {
        hosts.extend([format!("127.0.0.1:{port}"), format!("localhost:{port}"), format!("[::1]:{port}")]);
    } else if addr.ip().is_unspecified() {
        // 0.0.0.0 is no Host anyone sends: only the configured names (and loopback, for this host's clients).
        hosts.extend([format!("127.0.0.1:{port}"), format!("localhost:{port}")]);
    } else {
        hosts.push(SocketAddr::new(addr.ip(), port).to_string());
    }
    hosts.extend(extra.iter().cloned());
    hosts
}

/// Serve MCP over HTTP until Ctrl-C or SIGTERM ([`crate::long_running::StopSignal`]).
pub async fn run(
    engine: Arc<dyn MemoryBackend>,
    workspace: PathBuf,
    allow_append: bool,
    watch: Option<crate::watch::WatchHandle>,
    options: HttpOptions,
) -> anyhow::Result<()> {
    let listener = tokio::net::TcpListener::bind(options.addr).await.with_context(|| format!("cannot listen on {}", options.addr))?;
    let addr = listener.local_addr()?;
    let hosts = own_hosts(addr, &options.allowed_hosts);
    let origins: Vec<String> = hosts.iter().flat_map(|h| [format!("http://{h}"), format!("https://{h}")]).collect();
    let config = StreamableHttpServerConfig::default()
        .with_allowed_hosts(hosts.clone())
        .with_allowed_origins(origins)
        .enforce_origin_validation()
        .with_max_request_body_bytes(options.max_body);
    // Ends the sessions' streams at shutdown.
    let cancel = config.cancellation_token.clone();
    let service = StreamableHttpService::new(
        move || Ok(MemoryServer::new(engine.clone(), workspace.clone(), allow_append)),
        Arc::new(LocalSessionManager::default()),
        config,
    );
    // On stderr, for people and for tests that asked for port 0.
    eprintln!("MCP over HTTP on http://{addr}{MCP_PATH} (bearer token: {})", options.token_source);
    info!(%addr, hosts = ?hosts, "MCP server on HTTP");
    let token: Arc<str> = Arc::from(options.token.as_str());
    let mut stop = crate::long_running::StopSignal::listen()?;
    loop {
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = stop.received() => break,
        };
        let service = service.clone();
        let token = token.clone();
        tokio::spawn(async move {
            let handler = hyper::service::service_fn(move |req: Request<hyper::body::Incoming>| {
                let mut service = service.clone();
                let token = token.clone();
                async move {
                    if !authorized(&req, &token) {
                        debug!(%peer, "request without the bearer token refused");
                        let mut r = plain(StatusCode::UNAUTHORIZED, "a bearer token is required\n");
                        r.headers_mut().insert(hyper::header::WWW_AUTHENTICATE, hyper::header::HeaderValue::from_static("Bearer"));
                        return Ok::<_, Infallible>(r);
                    }
                    if req.uri().path() != MCP_PATH {
                        return Ok(plain(StatusCode::NOT_FOUND, "MCP is served at /mcp\n"));
                    }
                    tower_service::Service::call(&mut service, req).await
                }
            });
            let io = hyper_util::rt::TokioIo::new(stream);
            let conn = hyper::server::conn::http1::Builder::new()
                .timer(hyper_util::rt::TokioTimer::new())
                .header_read_timeout(Duration::from_secs(10))
                .serve_connection(io, handler);
            if let Err(e) = conn.await {
                debug!(%peer, error = %e, "HTTP connection ended");
            }
        });
    }
    cancel.cancel();
    if let Some(w) = watch {
        w.stop().await;
    }
    Ok(())
}
