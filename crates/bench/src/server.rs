//! `memory-bench server` (issue 35): one-shot `memory search` with and without the shared server
//! (`memory server start`), whole process, on N generated notes; a search right after a note was written
//! (freshness through the server); then C concurrent clients — half one-shot CLI commands through the server,
//! half MCP over HTTP (`memory serve --http`) — of S searches each while one client appends, counting wrong
//! answers and errors and sampling both servers' resident memory.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};

use conformance::testing::HttpReply;

use crate::corpus;
use crate::model_oneshot::{quantile_ms, run_ok};

/// The command line of `memory-bench server` (see its help).
#[derive(clap::Args)]
pub struct Options {
    #[arg(long, value_delimiter = ',', default_value = "2000")]
    pub notes: Vec<usize>,
    /// Whole-process searches per figure.
    #[arg(long, default_value_t = 51)]
    pub runs: usize,
    /// Concurrent clients (half CLI, half MCP over HTTP); 0 skips the concurrency run.
    #[arg(long, default_value_t = 8)]
    pub clients: usize,
    /// Searches per concurrent client.
    #[arg(long, default_value_t = 1000)]
    pub searches: usize,
    #[arg(long)]
    pub memory_bin: Option<PathBuf>,
    /// Hybrid search with the local embedding model in this folder (default: keyword-only).
    #[arg(long)]
    pub model: Option<PathBuf>,
    /// Bytes per generated note.
    #[arg(long, default_value_t = 2048)]
    pub note_bytes: usize,
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    /// Keep corpora and indexes here (reused by the next run).
    #[arg(long)]
    pub keep: Option<PathBuf>,
}

/// A word no generated note holds: the concurrency check's query, with one known answer.
const ANCHOR: &str = "xylophonequartz";

fn memory(bin: &Path, ws: &Path, state: &Path, config: &Path) -> Command {
    let mut c = Command::new(bin);
    c.arg("--workspace").arg(ws).arg("--state-dir").arg(state).arg("--config").arg(config).env("RUST_LOG", "error");
    c.env("OPENCLAW_STATE_DIR", state.join("no-openclaw")).env_remove("MEMORY_NO_SERVER");
    c
}

fn rss_of(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    Some(line.trim_start_matches("VmRSS:").trim().trim_end_matches("kB").trim().parse::<u64>().ok()? * 1024)
}

fn mib(b: u64) -> f64 {
    b as f64 / (1024.0 * 1024.0)
}

fn top_path(json: &str) -> Option<String> {
    let v: serde_json::Value = serde_json::from_str(json).ok()?;
    v["results"][0]["path"].as_str().map(str::to_string)
}

pub fn run(opts: Options) -> anyhow::Result<()> {
    let bin = match &opts.memory_bin {
        Some(b) => b.clone(),
        None => std::env::current_exe()?.with_file_name("memory"),
    };
    println!(
        "shared server (issue 35): one-shot `memory search`, whole process, median / p90 of {} runs; load average {}; {}",
        opts.runs,
        std::fs::read_to_string("/proc/loadavg").unwrap_or_default().split_whitespace().take(3).collect::<Vec<_>>().join(" "),
        match &opts.model {
            Some(m) => format!("hybrid with the local model {}", m.display()),
            None => "keyword-only builtin".into(),
        }
    );
    for &n in &opts.notes {
        let temp;
        let root = match &opts.keep {
            Some(k) => k.join(format!("server-{n}-{}", if opts.model.is_some() { "model" } else { "keyword" })),
            None => {
                temp = tempfile::tempdir()?;
                temp.path().to_path_buf()
            }
        };
        let ws = root.join("ws");
        let state = root.join("state");
        let config = root.join("config.json5");
        let fresh = !ws.join("memory").is_dir();
        if fresh {
            std::fs::create_dir_all(&ws)?;
            corpus::generate_sized(&ws, n, opts.seed, opts.note_bytes)?;
            std::fs::write(ws.join("memory/bench-anchor.md"), format!("# Anchor\n\nThe {ANCHOR} token lives in this note only.\n"))?;
            // Let the file times settle before the index records them (see `freshness`).
            std::thread::sleep(Duration::from_millis(2100));
        }
        let cfg = match &opts.model {
            Some(m) => format!("{{ memory: {{ search: {{ provider: \"local\", local: {{ modelPath: {:?} }} }} }} }}", m.display().to_string()),
            None => "{ memory: { search: { sync: { onSearch: true } } } }".into(),
        };
        std::fs::write(&config, cfg)?;
        let m = |args: &[&str]| {
            let mut c = memory(&bin, &ws, &state, &config);
            c.args(args);
            c
        };
        // Never measure against a server left by an earlier run.
        let _ = run_ok(&mut m(&["server", "stop"]));
        let (took, _) = run_ok(&mut m(&["index"])).context("index")?;
        println!("\n{n} notes: indexed in {:.1} s", took.as_secs_f64());
        let queries = corpus::queries(opts.runs * 3 + 10, opts.seed);
        // Warm the page cache for both paths.
        for q in queries.iter().take(3) {
            run_ok(&mut m(&["--no-server", "search", q]))?;
        }
        let mut one_shot = Vec::new();
        for q in queries.iter().take(opts.runs) {
            one_shot.push(run_ok(&mut m(&["--no-server", "search", q]))?.0);
        }
        let (_, started) = run_ok(&mut m(&["server", "start", "--idle-timeout", "600"])).context("server start")?;
        print!("  {started}");
        for q in queries.iter().take(3) {
            run_ok(&mut m(&["search", q]))?;
        }
        // Interleaved with the floor every command pays: starting the process (`memory --version`).
        let mut served = Vec::new();
        let mut floor = Vec::new();
        for q in queries.iter().skip(opts.runs).take(opts.runs) {
            served.push(run_ok(&mut m(&["search", q]))?.0);
            floor.push(run_ok(Command::new(&bin).arg("--version"))?.0);
        }
        // A note written just before each search: found through the server's change journal.
        let mut after_write = Vec::new();
        let mut missed = 0;
        for i in 0..opts.runs {
            let word = format!("zorblaxian{i}x");
            let path = format!("memory/fresh-{i}.md");
            std::fs::write(ws.join(&path), format!("# Fresh\n\nThe {word} note was written just now.\n"))?;
            let (d, out) = run_ok(&mut m(&["search", &word, "--json"]))?;
            after_write.push(d);
            if top_path(&out).as_deref() != Some(path.as_str()) {
                missed += 1;
            }
        }
        let status: serde_json::Value = serde_json::from_str(&run_ok(&mut m(&["server", "status", "--json"]))?.1)?;
        println!("  {:<44} {:>9} {:>9}", "", "median", "p90");
        println!("  {:<44} {:>6.1} ms {:>6.1} ms", "one-shot, in-process (--no-server)", quantile_ms(&one_shot, 0.5), quantile_ms(&one_shot, 0.9));
        println!("  {:<44} {:>6.1} ms {:>6.1} ms", "one-shot, through the server", quantile_ms(&served, 0.5), quantile_ms(&served, 0.9));
        println!("  {:<44} {:>6.1} ms {:>6.1} ms", "process start alone (memory --version)", quantile_ms(&floor, 0.5), quantile_ms(&floor, 0.9));
        println!(
            "  {:<44} {:>6.1} ms {:>6.1} ms   ({} of {} found)",
            "through the server, note written just before",
            quantile_ms(&after_write, 0.5),
            quantile_ms(&after_write, 0.9),
            opts.runs - missed,
            opts.runs
        );
        println!("  server: {} requests answered, RSS {:.1} MiB", status["requests"], status["rssBytes"].as_u64().map_or(f64::NAN, mib));
        if opts.clients > 0 && opts.searches > 0 {
            let server_pid = status["pid"].as_u64().context("server pid")? as u32;
            concurrent(&opts, &bin, &ws, &state, &config, server_pid)?;
        }
        run_ok(&mut m(&["server", "stop"]))?;
    }
    Ok(())
}

/// C clients (half CLI through the shared server, half MCP over HTTP) x S searches while one client appends.
fn concurrent(opts: &Options, bin: &Path, ws: &Path, state: &Path, config: &Path, server_pid: u32) -> anyhow::Result<()> {
    let http_clients = opts.clients / 2;
    let cli_clients = opts.clients - http_clients;
    let mut http =
        memory(bin, ws, state, config).args(["serve", "--http", "127.0.0.1:0", "--no-watch"]).stdin(Stdio::piped()).stderr(Stdio::piped()).spawn()?;
    let mut err = std::io::BufReader::new(http.stderr.take().context("stderr")?);
    let mut line = String::new();
    while !line.contains("MCP over HTTP on") {
        line.clear();
        if std::io::BufRead::read_line(&mut err, &mut line)? == 0 {
            bail!("memory serve --http exited");
        }
    }
    std::thread::spawn(move || std::io::copy(&mut err, &mut std::io::sink()));
    let port: u16 = line.split("127.0.0.1:").nth(1).and_then(|s| s.split('/').next()).context("port")?.parse()?;
    let token = std::fs::read_to_string(state.join("mcp-http.token"))?.trim().to_string();
    let http_pid = http.id();
    let done = Arc::new(AtomicBool::new(false));
    let wrong = Arc::new(AtomicU64::new(0));
    let errors = Arc::new(AtomicU64::new(0));
    let peak = Arc::new([AtomicU64::new(0), AtomicU64::new(0)]);
    let sampler = {
        let (done, peak) = (done.clone(), peak.clone());
        std::thread::spawn(move || {
            while !done.load(Ordering::Relaxed) {
                for (i, pid) in [server_pid, http_pid].into_iter().enumerate() {
                    if let Some(r) = rss_of(pid) {
                        peak[i].fetch_max(r, Ordering::Relaxed);
                    }
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        })
    };
    let expected = "memory/bench-anchor.md";
    let started = Instant::now();
    let appended = std::thread::scope(|s| -> anyhow::Result<u64> {
        let mut handles = Vec::new();
        for _ in 0..cli_clients {
            let (wrong, errors) = (wrong.clone(), errors.clone());
            handles.push(s.spawn(move || {
                for _ in 0..opts.searches {
                    match run_ok(memory(bin, ws, state, config).args(["search", ANCHOR, "--json"])) {
                        Ok((_, out)) if top_path(&out).as_deref() == Some(expected) => {}
                        Ok(_) => {
                            wrong.fetch_add(1, Ordering::Relaxed);
                        }
                        Err(_) => {
                            errors.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                }
            }));
        }
        for _ in 0..http_clients {
            let (wrong, errors, token) = (wrong.clone(), errors.clone(), token.clone());
            handles.push(s.spawn(move || {
                let Ok(session) = mcp_session(port, &token) else {
                    errors.fetch_add(opts.searches as u64, Ordering::Relaxed);
                    return;
                };
                for i in 0..opts.searches {
                    let call = format!(
                        r#"{{"jsonrpc":"2.0","id":{},"method":"tools/call","params":{{"name":"memory_search","arguments":{{"query":"{ANCHOR}"}}}}}}"#,
                        i + 10
                    );
                    match post(port, &token, Some(&session), call.as_bytes()) {
                        Ok((200, body)) => {
                            let path =
                                message(&body).and_then(|m| m["result"]["structuredContent"]["results"][0]["path"].as_str().map(str::to_string));
                            if path.as_deref() != Some(expected) {
                                wrong.fetch_add(1, Ordering::Relaxed);
                            }
                        }
                        _ => {
                            errors.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                }
            }));
        }
        let mut appended = 0;
        while handles.iter().any(|h| !h.is_finished()) {
            let text = format!("bench append {appended}: the capybara{appended}q note");
            if run_ok(memory(bin, ws, state, config).args(["append", &text])).is_err() {
                errors.fetch_add(1, Ordering::Relaxed);
            }
            appended += 1;
        }
        for h in handles {
            if h.join().is_err() {
                errors.fetch_add(1, Ordering::Relaxed);
            }
        }
        Ok(appended)
    })?;
    let took = started.elapsed();
    done.store(true, Ordering::Relaxed);
    let _ = sampler.join();
    let _ = http.kill();
    let _ = http.wait();
    println!(
        "  concurrent: {cli_clients} CLI + {http_clients} HTTP MCP clients x {} searches while appending ({appended} appends) in {:.1} s: {} wrong, {} errors; peak RSS shared server {:.1} MiB, HTTP server {:.1} MiB",
        opts.searches,
        took.as_secs_f64(),
        wrong.load(Ordering::Relaxed),
        errors.load(Ordering::Relaxed),
        mib(peak[0].load(Ordering::Relaxed)),
        mib(peak[1].load(Ordering::Relaxed)),
    );
    Ok(())
}

fn mcp_session(port: u16, token: &str) -> anyhow::Result<String> {
    let init = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}}"#;
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port))?;
    let head = request_head(port, token, None, init.len());
    s.write_all(head.as_bytes())?;
    s.write_all(init.as_bytes())?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw)?;
    let session = HttpReply::parse(&raw).map_err(anyhow::Error::msg)?.header("mcp-session-id").context("no session id")?.to_string();
    post(port, token, Some(&session), br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#)?;
    Ok(session)
}

fn request_head(port: u16, token: &str, session: Option<&str>, len: usize) -> String {
    let mut h = format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer {token}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: {len}\r\nConnection: close\r\n"
    );
    if let Some(s) = session {
        h.push_str(&format!("Mcp-Session-Id: {s}\r\n"));
    }
    h.push_str("\r\n");
    h
}

/// One request on its own connection: (status, de-chunked body).
fn post(port: u16, token: &str, session: Option<&str>, body: &[u8]) -> anyhow::Result<(u16, String)> {
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port))?;
    s.set_read_timeout(Some(Duration::from_secs(60)))?;
    s.write_all(request_head(port, token, session, body.len()).as_bytes())?;
    s.write_all(body)?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw)?;
    let reply = HttpReply::parse(&raw).map_err(anyhow::Error::msg)?;
    Ok((reply.status, reply.body))
}

fn message(body: &str) -> Option<serde_json::Value> {
    body.lines().filter_map(|l| l.strip_prefix("data:")).map(str::trim).filter(|d| d.starts_with('{')).find_map(|d| serde_json::from_str(d).ok())
}
