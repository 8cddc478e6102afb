//! A loopback HTTP/1.1 server for the wire-format tests: records every request (method, path, headers, JSON
//! body) and answers what the test's handler says, optionally after a delay. Connections are closed after each
//! answer. Bounded by the tests themselves (each test sends a handful of requests).

#![allow(dead_code, reason = "each test binary includes this module and uses only some of its helpers")]

pub mod contract;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// HTTP settings for tests against the loopback server: short timeouts and back-offs, three retries.
pub fn fast_http() -> providers::HttpOptions {
    providers::HttpOptions {
        request_timeout: Duration::from_secs(3),
        max_retries: 3,
        initial_backoff: Duration::from_millis(10),
        max_backoff: Duration::from_millis(100),
        max_retry_after: Duration::from_secs(5),
    }
}

#[derive(Debug, Clone)]
pub struct Recorded {
    pub method: String,
    pub path: String,
    /// Lowercased names.
    pub headers: BTreeMap<String, String>,
    pub raw_body: String,
    pub body: Value,
}

impl Recorded {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(&name.to_ascii_lowercase()).map(String::as_str)
    }
}

#[derive(Debug, Clone)]
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
    pub delay: Duration,
}

impl Reply {
    pub fn json(status: u16, body: impl Into<String>) -> Self {
        Reply { status, headers: vec![("content-type".into(), "application/json".into())], body: body.into(), delay: Duration::ZERO }
    }
    pub fn text(status: u16, body: impl Into<String>) -> Self {
        Reply { status, headers: vec![("content-type".into(), "text/plain".into())], body: body.into(), delay: Duration::ZERO }
    }
    pub fn header(mut self, name: &str, value: &str) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }
    pub fn delayed(mut self, d: Duration) -> Self {
        self.delay = d;
        self
    }
}

type Handler = dyn Fn(&Recorded, usize) -> Reply + Send + Sync;

pub struct MockServer {
    pub addr: SocketAddr,
    requests: Arc<Mutex<Vec<Recorded>>>,
    peak_in_flight: Arc<AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for MockServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl MockServer {
    /// `handler(request, n)` answers the n-th request (0-based, in arrival order).
    pub async fn start(handler: impl Fn(&Recorded, usize) -> Reply + Send + Sync + 'static) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind loopback");
        let addr = listener.local_addr().unwrap();
        let requests = Arc::new(Mutex::new(Vec::new()));
        let handler: Arc<Handler> = Arc::new(handler);
        let in_flight = Arc::new(AtomicUsize::new(0));
        let peak = Arc::new(AtomicUsize::new(0));
        let (reqs, pk) = (requests.clone(), peak.clone());
        let task = tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else { return };
                let (reqs, handler, in_flight, pk) = (reqs.clone(), handler.clone(), in_flight.clone(), pk.clone());
                tokio::spawn(async move {
                    let _ = serve(stream, reqs, handler, in_flight, pk).await;
                });
            }
        });
        MockServer { addr, requests, peak_in_flight: peak, task }
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn requests(&self) -> Vec<Recorded> {
        self.requests.lock().unwrap().clone()
    }

    /// Most requests being answered at one time.
    pub fn peak_in_flight(&self) -> usize {
        self.peak_in_flight.load(Ordering::SeqCst)
    }
}

async fn serve(
    mut stream: TcpStream,
    reqs: Arc<Mutex<Vec<Recorded>>>,
    handler: Arc<Handler>,
    in_flight: Arc<AtomicUsize>,
    peak: Arc<AtomicUsize>,
) -> std::io::Result<()> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    let header_end = loop {
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            return Ok(());
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
    };
    let head = String::from_utf8_lossy(&buf[..header_end]).to_string();
    let mut lines = head.split("\r\n");
    let request_line = lines.next().unwrap_or_default();
    let mut parts = request_line.split(' ');
    let method = parts.next().unwrap_or_default().to_string();
    let path = parts.next().unwrap_or_default().to_string();
    let mut headers = BTreeMap::new();
    for line in lines.filter(|l| !l.is_empty()) {
        if let Some((k, v)) = line.split_once(':') {
            headers.insert(k.trim().to_ascii_lowercase(), v.trim().to_string());
        }
    }
    let len: usize = headers.get("content-length").and_then(|v| v.parse().ok()).unwrap_or(0);
    let mut body = buf[header_end..].to_vec();
    while body.len() < len {
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            break;
        }
        body.extend_from_slice(&chunk[..n]);
    }
    let raw_body = String::from_utf8_lossy(&body).to_string();
    let rec = Recorded { method, path, headers, body: serde_json::from_str(&raw_body).unwrap_or(Value::Null), raw_body };
    let n = {
        let mut r = reqs.lock().unwrap();
        r.push(rec.clone());
        r.len() - 1
    };
    let now = in_flight.fetch_add(1, Ordering::SeqCst) + 1;
    peak.fetch_max(now, Ordering::SeqCst);
    let reply = handler(&rec, n);
    if !reply.delay.is_zero() {
        tokio::time::sleep(reply.delay).await;
    }
    let reason = match reply.status {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        404 => "Not Found",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        503 => "Service Unavailable",
        _ => "Status",
    };
    let mut out = format!("HTTP/1.1 {} {reason}\r\ncontent-length: {}\r\nconnection: close\r\n", reply.status, reply.body.len());
    for (k, v) in &reply.headers {
        out.push_str(&format!("{k}: {v}\r\n"));
    }
    out.push_str("\r\n");
    out.push_str(&reply.body);
    let result = stream.write_all(out.as_bytes()).await;
    let _ = stream.shutdown().await;
    in_flight.fetch_sub(1, Ordering::SeqCst);
    result
}

/// The model folder for tests: `$MEMORY_TEST_MODEL`, else the setup script's default location.
pub fn test_model_dir() -> std::path::PathBuf {
    let dir = std::env::var_os("MEMORY_TEST_MODEL")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| std::path::PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache/memory-rs/models/all-MiniLM-L6-v2"));
    assert!(
        dir.join("model.safetensors").is_file() && dir.join("tokenizer.json").is_file(),
        "test model all-MiniLM-L6-v2 not found at {} (run `bash scripts/setup.sh` or set MEMORY_TEST_MODEL)",
        dir.display()
    );
    dir
}
