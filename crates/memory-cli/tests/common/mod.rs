//! What the CLI tests share: the built `memory` command on a workspace and a state folder, isolated from the
//! environment a developer's shell may carry (their config, log level, OpenClaw install, agent).
#![allow(dead_code, reason = "each test binary includes this module and uses only some of its helpers")]

use std::io::{BufRead, Read, Write};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use serde_json::{json, Value};

/// `memory --workspace WS --state-dir STATE [--config CONFIG]`, with no inherited config, logs, agent or OpenClaw.
pub fn memory(ws: &Path, state: &Path, config: Option<&Path>) -> Command {
    let mut c = isolated(Command::new(env!("CARGO_BIN_EXE_memory")), state);
    c.arg("--workspace").arg(ws).arg("--state-dir").arg(state);
    if let Some(p) = config {
        c.arg("--config").arg(p);
    }
    c
}

/// `c` without the config, log level, agent or OpenClaw install a developer's shell may carry (OpenClaw's state
/// folder points into `state`, where there is none), without background embedding processes (a command that
/// leaves files waiting for vectors would start one that outlives the test; the tests of that start turn it back
/// on), and without model downloads (a test that serves one says so: `HF_HUB_OFFLINE` removed, `HF_ENDPOINT` at
/// its own server).
pub fn isolated(mut c: Command, state: &Path) -> Command {
    c.env("MEMORY_BACKGROUND_EMBED", "0")
        .env_remove("MEMORY_CONFIG")
        .env_remove("RUST_LOG")
        .env_remove("MEMORY_AGENT")
        .env("OPENCLAW_STATE_DIR", state.join("no-openclaw"))
        .env_remove("OPENCLAW_CONFIG_PATH")
        .env("HF_HUB_OFFLINE", "1")
        .env_remove("HF_ENDPOINT")
        .env_remove("MODEL_ENDPOINT");
    c
}

/// MEMORY.md of most CLI tests' workspaces: the fact their searches and reads look for.
pub const GATEWAY_NOTE: &str = "# Memory\n\nThe gateway runs on the Mac Studio.\n";

/// A workspace with `memory/`, MEMORY.md ([`GATEWAY_NOTE`]) and `notes` (workspace-relative path, text), and an
/// empty state folder.
pub fn workspace(notes: &[(&str, &str)]) -> conformance::testing::TestDirs {
    let dirs = conformance::testing::TestDirs::new();
    for (rel, text) in [("MEMORY.md", GATEWAY_NOTE)].iter().chain(notes) {
        std::fs::write(dirs.ws.path().join(rel), text).unwrap_or_else(|e| panic!("write {rel}: {e}"));
    }
    dirs
}

/// An OpenAI-compatible embeddings server on loopback that answers every request of several texts (a batch of
/// notes) `delay` late, as a model server on a busy CPU does, and a single text (a query) at once. Returns its
/// base URL.
pub fn slow_embedding_server(delay: Duration) -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming().map_while(Result::ok) {
            std::thread::spawn(move || {
                let mut reader = std::io::BufReader::new(stream);
                let mut length = 0;
                loop {
                    let mut line = String::new();
                    if reader.read_line(&mut line).unwrap_or(0) == 0 {
                        return;
                    }
                    if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                        length = v.trim().parse().unwrap_or(0);
                    }
                    if line == "\r\n" {
                        break;
                    }
                }
                let mut body = vec![0; length];
                if reader.read_exact(&mut body).is_err() {
                    return;
                }
                let request: Value = serde_json::from_slice(&body).unwrap_or_default();
                let texts: Vec<String> = match &request["input"] {
                    Value::String(s) => vec![s.clone()],
                    Value::Array(a) => a.iter().map(|t| t.as_str().unwrap_or_default().to_string()).collect(),
                    _ => Vec::new(),
                };
                if texts.len() > 1 {
                    std::thread::sleep(delay);
                }
                let data: Vec<Value> = texts
                    .iter()
                    .enumerate()
                    .map(|(i, t)| {
                        // Words as a model reads them (case and punctuation aside), hashed into 64 buckets: a note
                        // sharing the question's words is more like it than an unrelated sentence is.
                        let mut v = vec![0.0f32; 64];
                        for w in t.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()) {
                            let w = w.to_lowercase();
                            v[w.bytes().fold(0usize, |h, b| h.wrapping_mul(31).wrapping_add(b as usize)) % 64] += 1.0;
                        }
                        v[0] += 0.01;
                        json!({"object": "embedding", "index": i, "embedding": v})
                    })
                    .collect();
                let out = json!({"object": "list", "data": data, "model": "m", "usage": {"prompt_tokens": 1, "total_tokens": 1}}).to_string();
                let mut stream = reader.into_inner();
                let _ = write!(
                    stream,
                    "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{out}",
                    out.len()
                );
            });
        }
    });
    format!("http://127.0.0.1:{port}/v1")
}

/// How the rounds of a stress test took: "round p50 .., p99 .., max ..", from the time each round took.
pub fn round_times(mut took: Vec<Duration>) -> String {
    took.sort();
    let at = |q: f64| took.get(((took.len().saturating_sub(1)) as f64 * q).round() as usize).copied().unwrap_or_default();
    format!("round p50 {:?}, p99 {:?}, max {:?}", at(0.5), at(0.99), at(1.0))
}
