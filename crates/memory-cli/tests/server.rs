//! The shared server (`memory server start|stop|status`) and MCP over HTTP (`memory serve --http`), through the
//! built binary: same bytes with and without the server, fallback on every failure, the files a killed server
//! leaves, one server per state folder, upgrades, and the HTTP transport's refusals.
//!
//! Unix only: the shared server is Unix's (a Unix socket), and the token file's checks here are Unix modes.
#![cfg(unix)]

mod common;

use std::fs;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use conformance::testing::HttpReply;

struct Env {
    dir: tempfile::TempDir,
    /// The `memory` binary the commands run (a copy, for the upgrade test).
    bin: PathBuf,
}

impl Env {
    fn new() -> Env {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        fs::create_dir_all(ws.join("memory")).unwrap();
        fs::create_dir_all(dir.path().join("state")).unwrap();
        fs::write(ws.join("MEMORY.md"), "# Memory\n\nThe gateway runs on the Mac Studio.\nDeploys go through the canary first.\n").unwrap();
        fs::write(ws.join("memory/2026-11-29.md"), "# 2026-11-29\n\n- Fixed error E4012 in billing\n- Lunch with Alice about the gateway\n").unwrap();
        fs::write(ws.join("memory/notes.md"), "# Notes\n\nKubernetes canary rollout checklist\n\nThe billing service talks to the gateway.\n")
            .unwrap();
        Env { dir, bin: PathBuf::from(env!("CARGO_BIN_EXE_memory")) }
    }

    fn ws(&self) -> PathBuf {
        self.dir.path().join("ws")
    }

    fn state(&self) -> PathBuf {
        self.dir.path().join("state")
    }

    /// The shared helper's command (arguments, isolated environment), run with this env's binary.
    fn cmd(&self) -> Command {
        let shared = common::memory(&self.ws(), &self.state(), None);
        let mut c = Command::new(&self.bin);
        c.args(shared.get_args()).env_remove("MEMORY_NO_SERVER");
        for (k, v) in shared.get_envs() {
            match v {
                Some(v) => c.env(k, v),
                None => c.env_remove(k),
            };
        }
        c
    }

    /// Runs the command. A binary copied a moment ago (the upgrade test) may be refused as busy for as long as a
    /// process another test thread forked still holds the copy's write handle before its exec: tried again then.
    fn run(&self, args: &[&str]) -> Output {
        let mut tries = 0;
        loop {
            match self.cmd().args(args).stdin(Stdio::null()).output() {
                Err(e) if e.kind() == std::io::ErrorKind::ExecutableFileBusy && tries < 100 => {
                    tries += 1;
                    std::thread::sleep(Duration::from_millis(20));
                }
                result => return result.unwrap(),
            }
        }
    }

    fn ok(&self, args: &[&str]) -> Output {
        let o = self.run(args);
        assert!(o.status.success(), "{args:?}: {}", String::from_utf8_lossy(&o.stderr));
        o
    }

    fn start(&self) -> u32 {
        let o = self.ok(&["server", "start", "--idle-timeout", "300"]);
        let text = String::from_utf8_lossy(&o.stdout).into_owned();
        pid_in(&text)
    }

    fn status(&self) -> serde_json::Value {
        let o = self.ok(&["server", "status", "--json"]);
        serde_json::from_slice(&o.stdout).unwrap()
    }

    /// Run requests the server has answered.
    fn requests(&self) -> u64 {
        self.status()["requests"].as_u64().expect("a running server")
    }
}

impl Drop for Env {
    fn drop(&mut self) {
        // Never leave a server behind.
        let _ = self.cmd().args(["server", "stop"]).output();
    }
}

fn pid_in(text: &str) -> u32 {
    let after = text.split("(pid ").nth(1).unwrap_or_else(|| panic!("no pid in {text:?}"));
    after.split(')').next().unwrap().trim().parse().unwrap()
}

fn alive(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists() && !fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default().contains(") Z ")
}

fn mode(p: &Path) -> u32 {
    fs::metadata(p).unwrap().permissions().mode() & 0o777
}

/// The same command with and without the server: identical stdout, stderr and exit code.
fn same_both_ways(env: &Env, args: &[&str]) -> Output {
    let before = env.requests();
    let served = env.run(args);
    assert_eq!(env.requests(), before + 1, "{args:?} was not answered by the server");
    let mut local_args = vec!["--no-server"];
    local_args.extend_from_slice(args);
    let local = env.run(&local_args);
    assert_eq!(String::from_utf8_lossy(&served.stdout), String::from_utf8_lossy(&local.stdout), "{args:?}");
    assert_eq!(served.stdout, local.stdout, "{args:?}");
    assert_eq!(served.stderr, local.stderr, "{args:?}");
    assert_eq!(served.status.code(), local.status.code(), "{args:?}");
    served
}

#[test]
fn the_server_answers_byte_for_byte_as_the_command_does() {
    let env = Env::new();
    env.ok(&["index"]);
    env.start();
    for args in [
        &["search", "gateway", "--json"][..],
        &["search", "which error did I fix in billing?"],
        &["search", "canary", "--max-results", "1", "--json"],
        &["search", "nothing matches zyzzyva"],
        &["search", "gateway", "--source", "memory", "--min-score", "0.9"],
        &["index", "--json"],
    ] {
        let o = same_both_ways(&env, args);
        assert!(o.status.success());
    }
    // An error is the same error.
    let o = same_both_ways(&env, &["search", "  "]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).starts_with("error: invalid input"), "{}", String::from_utf8_lossy(&o.stderr));
    // status: the same report (its clock line aside).
    let served = env.ok(&["status", "--json"]);
    let local = env.ok(&["--no-server", "status", "--json"]);
    let (mut a, mut b): (serde_json::Value, serde_json::Value) =
        (serde_json::from_slice(&served.stdout).unwrap(), serde_json::from_slice(&local.stdout).unwrap());
    for v in [&mut a, &mut b] {
        v.as_object_mut().unwrap().remove("indexBytes");
    }
    assert_eq!(a, b);
    let status = env.status();
    assert_eq!(status["engines"].as_array().unwrap().len(), 2, "one engine for searches, one for status: {status}");
    assert!(status["rssBytes"].as_u64().unwrap() > 0);
}

#[test]
fn a_note_written_just_before_is_found_through_the_server() {
    let env = Env::new();
    env.start();
    env.ok(&["search", "gateway"]);
    env.ok(&["search", "gateway"]);
    for i in 0..3 {
        let word = format!("quokka{i}");
        fs::write(env.ws().join(format!("memory/new-{i}.md")), format!("# New\n\nThe {word} lives in the server room.\n")).unwrap();
        let before = env.requests();
        let o = env.ok(&["search", &word, "--json"]);
        assert_eq!(env.requests(), before + 1);
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(v["results"][0]["path"], format!("memory/new-{i}.md"), "{v}");
    }
    // append goes through the server too, and what it wrote is found at once.
    let before = env.requests();
    let o = env.ok(&["append", "The", "wombat", "guards", "the", "rack", "--json"]);
    assert_eq!(env.requests(), before + 1);
    let r: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(r["indexed"], true, "{r}");
    let o = env.ok(&["search", "wombat", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["results"][0]["path"], r["path"]);
    // Written once.
    let text = fs::read_to_string(env.ws().join(r["path"].as_str().unwrap())).unwrap();
    assert_eq!(text.matches("wombat").count(), 1);
}

/// The indexed workspace's in-process answer to a search for `query`, and the server's socket bound for a fake
/// server to take the command's connections.
fn answer_and_socket(env: &Env, query: &str) -> (Output, UnixListener) {
    env.ok(&["index"]);
    let expected = env.ok(&["--no-server", "search", query, "--json"]);
    (expected, UnixListener::bind(env.state().join("server.sock")).unwrap())
}

/// A server that takes the request and dies before answering (as a killed server does): the command answers
/// in-process, with the same bytes.
#[test]
fn a_server_that_dies_mid_request_leaves_the_answer_to_the_command() {
    let env = Env::new();
    let (expected, listener) = answer_and_socket(&env, "gateway");
    let fake = std::thread::spawn(move || {
        let mut taken = 0;
        for stream in listener.incoming().take(2) {
            let mut stream = stream.unwrap();
            let mut line = String::new();
            BufReader::new(&stream).read_line(&mut line).unwrap();
            assert!(line.contains("\"op\":\"run\""), "{line}");
            stream.write_all(b"{\"reply\":\"accepted\"}\n").unwrap();
            taken += 1;
            // Gone mid-request.
        }
        taken
    });
    let o = env.ok(&["search", "gateway", "--json"]);
    assert_eq!(o.stdout, expected.stdout);
    // append: the entry is written once whoever indexes it.
    let o = env.ok(&["append", "the", "okapi", "note", "--json"]);
    let r: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(r["indexed"], true);
    let text = fs::read_to_string(env.ws().join(r["path"].as_str().unwrap())).unwrap();
    assert_eq!(text.matches("okapi").count(), 1, "{text}");
    assert_eq!(fake.join().unwrap(), 2);
}

/// A server that takes the connection and never answers: the command answers within its bound, in-process.
#[test]
fn a_hung_server_is_not_waited_for() {
    let env = Env::new();
    let (expected, listener) = answer_and_socket(&env, "canary");
    let held = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let keep = held.clone();
    std::thread::spawn(move || {
        for s in listener.incoming().flatten() {
            keep.lock().unwrap().push(s);
        }
    });
    let o = env.ok(&["search", "canary", "--json"]);
    assert_eq!(o.stdout, expected.stdout);
    assert_eq!(held.lock().unwrap().len(), 1, "the command did not try the server");
}

#[test]
fn a_killed_server_leaves_files_that_are_cleaned_up() {
    let env = Env::new();
    let pid = env.start();
    assert!(alive(pid));
    assert_eq!(unsafe_kill(pid), 0);
    while alive(pid) {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(env.state().join("server.sock").exists() && env.state().join("server.pid").exists(), "the kill left no files to clean");
    // The command still answers (in-process), the same as without a server.
    let served = env.ok(&["search", "gateway", "--json"]);
    let local = env.ok(&["--no-server", "search", "gateway", "--json"]);
    assert_eq!(served.stdout, local.stdout);
    let o = env.ok(&["server", "status"]);
    assert!(String::from_utf8_lossy(&o.stdout).contains("not running (removed the files"), "{}", String::from_utf8_lossy(&o.stdout));
    assert!(!env.state().join("server.sock").exists() && !env.state().join("server.pid").exists());
    // Killed again; a start cleans up after it and runs.
    let pid = env.start();
    assert_eq!(unsafe_kill(pid), 0);
    while alive(pid) {
        std::thread::sleep(Duration::from_millis(10));
    }
    let pid2 = env.start();
    assert_ne!(pid, pid2);
    assert_eq!(env.status()["pid"], pid2);
}

fn unsafe_kill(pid: u32) -> i32 {
    Command::new("kill").arg("-KILL").arg(pid.to_string()).status().unwrap().code().unwrap_or(-1)
}

#[test]
fn two_starts_at_once_make_one_server() {
    let env = Env::new();
    let spawn = || env.cmd().args(["server", "start", "--idle-timeout", "300"]).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let (a, b) = (spawn(), spawn());
    let (a, b) = (a.wait_with_output().unwrap(), b.wait_with_output().unwrap());
    assert!(a.status.success(), "{}", String::from_utf8_lossy(&a.stderr));
    assert!(b.status.success(), "{}", String::from_utf8_lossy(&b.stderr));
    let (pa, pb) = (pid_in(&String::from_utf8_lossy(&a.stdout)), pid_in(&String::from_utf8_lossy(&b.stdout)));
    assert_eq!(pa, pb, "two servers: {pa} and {pb}");
    assert_eq!(env.status()["pid"], pa);
    let pid_file: u32 = fs::read_to_string(env.state().join("server.pid")).unwrap().trim().parse().unwrap();
    assert_eq!(pid_file, pa);
    // A third start finds it.
    let o = env.ok(&["server", "start"]);
    assert!(String::from_utf8_lossy(&o.stdout).contains(&format!("already running (pid {pa})")));
    env.ok(&["server", "stop"]);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while alive(pa) && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(!alive(pa));
    assert!(!env.state().join("server.sock").exists());
}

/// Engines unused for `--engine-idle` are closed; a server unused for `--idle-timeout` exits and leaves no files.
#[test]
fn idle_engines_close_and_an_idle_server_exits() {
    let env = Env::new();
    let o = env.ok(&["server", "start", "--idle-timeout", "3", "--engine-idle", "1"]);
    let pid = pid_in(&String::from_utf8_lossy(&o.stdout));
    env.ok(&["search", "gateway"]);
    let wait_until = |what: &str, done: &dyn Fn() -> bool| {
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        while !done() {
            assert!(std::time::Instant::now() < deadline, "never happened: {what}");
            std::thread::sleep(Duration::from_millis(50));
        }
    };
    wait_until("the idle engine closed", &|| env.status()["engines"].as_array().is_some_and(std::vec::Vec::is_empty));
    wait_until("the idle server exited", &|| !alive(pid));
    assert!(!env.state().join("server.sock").exists() && !env.state().join("server.pid").exists());
    let log = fs::read_to_string(env.state().join("server.log")).unwrap();
    assert!(log.contains("closing an idle engine") && log.contains("idle timeout"), "{log}");
}

#[test]
fn a_command_of_another_build_does_not_use_the_server() {
    let mut env = Env::new();
    let bin_dir = env.dir.path().join("bin");
    fs::create_dir_all(&bin_dir).unwrap();
    let bin = bin_dir.join("memory");
    fs::copy(env!("CARGO_BIN_EXE_memory"), &bin).unwrap();
    env.bin = bin.clone();
    env.ok(&["index"]);
    env.start();
    env.ok(&["search", "gateway"]);
    assert_eq!(env.requests(), 1);
    // Upgraded in place, as package managers do: a new file renamed over the old one.
    let next = bin_dir.join("memory.new");
    fs::copy(env!("CARGO_BIN_EXE_memory"), &next).unwrap();
    fs::rename(&next, &bin).unwrap();
    let served = env.ok(&["search", "gateway", "--json"]);
    let local = env.ok(&["--no-server", "search", "gateway", "--json"]);
    assert_eq!(served.stdout, local.stdout);
    let status = env.status();
    assert_eq!(status["sameBuild"], false, "{status}");
    assert_eq!(status["requests"], 1, "the upgraded command used the old server: {status}");
    // The new build stops the old server.
    env.ok(&["server", "stop"]);
    assert_eq!(env.status()["running"], false);
}

#[test]
fn the_socket_is_the_users_alone() {
    let env = Env::new();
    env.start();
    let socket = env.state().join("server.sock");
    assert_eq!(mode(&socket), 0o600);
    assert_eq!(mode(&env.state().join("server.pid")), 0o600);
    assert_eq!(mode(&env.state().join("server.log")), 0o600);
    // Another user who can reach the folder cannot connect.
    for d in [env.dir.path(), &env.state()] {
        fs::set_permissions(d, fs::Permissions::from_mode(0o755)).unwrap();
    }
    let probe = format!(
        "import os, socket\nos.stat({p:?})\ns = socket.socket(socket.AF_UNIX)\ntry:\n    s.connect({p:?})\n    print('connected')\nexcept PermissionError:\n    print('denied')\n",
        p = socket.display().to_string()
    );
    let other =
        Command::new("setpriv").args(["--reuid=65534", "--regid=65534", "--clear-groups", "/usr/bin/python3", "-c", &probe]).output().unwrap();
    assert_eq!(String::from_utf8_lossy(&other.stdout).trim(), "denied", "{}", String::from_utf8_lossy(&other.stderr));
    let me = Command::new("/usr/bin/python3").args(["-c", &probe]).output().unwrap();
    assert_eq!(String::from_utf8_lossy(&me.stdout).trim(), "connected", "{}", String::from_utf8_lossy(&me.stderr));
}

#[test]
fn hostile_input_on_the_socket_is_refused_and_the_server_goes_on() {
    let env = Env::new();
    env.start();
    let socket = env.state().join("server.sock");
    let ask = |bytes: &[u8]| -> String {
        let mut s = std::os::unix::net::UnixStream::connect(&socket).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        // The server may stop reading (and close) before all of an oversized line is sent.
        let _ = s.write_all(bytes);
        let mut reply = String::new();
        let _ = s.read_to_string(&mut reply);
        reply
    };
    assert!(ask(b"not json\n").contains("\"refused\""));
    assert!(ask(b"{\"protocol\":1,\"version\":\"x\",\"op\":\"run\"}\n").contains("\"refused\""));
    assert!(ask(b"{\"protocol\":1,\"version\":\"x\",\"op\":\"explode\"}\n").contains("\"refused\""));
    let mut big = vec![b'a'; 2 << 20];
    big.push(b'\n');
    assert!(ask(&big).contains("request over"));
    // A request for another build is refused (the client answers itself).
    let other = serde_json::json!({"protocol": 1, "version": "0.0.0+other", "op": "run", "workspace": env.ws(), "workspaceFrom": "flag",
        "agent": "main", "configPath": null, "configHash": "x", "job": {"cmd": "search", "request": {"query": "q"}, "json": true}});
    assert!(ask(format!("{other}\n").as_bytes()).contains("another build"));
    assert_eq!(env.requests(), 0);
    env.ok(&["search", "gateway"]);
    assert_eq!(env.requests(), 1);
}

#[test]
fn concurrent_commands_and_an_appender_get_right_answers() {
    let env = Env::new();
    env.ok(&["index"]);
    env.start();
    let env = &env;
    std::thread::scope(|s| {
        let searchers: Vec<_> = (0..4)
            .map(|_| {
                s.spawn(move || {
                    for _ in 0..15 {
                        let o = env.ok(&["search", "E4012", "--json"]);
                        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
                        assert_eq!(v["results"][0]["path"], "memory/2026-11-29.md", "{v}");
                    }
                })
            })
            .collect();
        for i in 0..10 {
            env.ok(&["append", &format!("appended note number {i} about capybaras")]);
        }
        for t in searchers {
            t.join().unwrap();
        }
    });
    let o = env.ok(&["search", "capybaras", "--max-results", "20", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(!v["results"].as_array().unwrap().is_empty());
    assert_eq!(env.requests(), 4 * 15 + 10 + 1);
}

/// Rounds of 2-16 one-shot commands of every kind started together against one shared server (search, recall,
/// status and append through it; get reads the file itself): every command answers, right, and the server counts
/// one request for each command it answered, no more. `MEMORY_SERVER_STRESS_ROUNDS` sets the rounds (the benchmark
/// figure in docs/BENCHMARKS.md is 10,000 of them); the round times are printed.
#[test]
fn rounds_of_commands_started_together_through_the_shared_server_are_each_answered_once() {
    let env = Env::new();
    env.ok(&["index"]);
    env.start();
    let before = env.requests();
    let rounds: usize = std::env::var("MEMORY_SERVER_STRESS_ROUNDS").ok().and_then(|v| v.parse().ok()).unwrap_or(20);
    let mut took = Vec::with_capacity(rounds);
    let mut asked = 0;
    let mut commands = 0;
    for round in 0..rounds {
        let n = 2 + (round * 7) % 15;
        commands += n;
        let kinds: Vec<usize> = (0..n).map(|i| (round + i) % 5).collect();
        asked += kinds.iter().filter(|k| **k != 1).count() as u64;
        let started = std::time::Instant::now();
        std::thread::scope(|s| {
            let runs: Vec<_> = kinds
                .iter()
                .enumerate()
                .map(|(i, kind)| {
                    let env = &env;
                    s.spawn(move || {
                        let (args, expect): (Vec<String>, &str) = match kind {
                            0 => (vec!["search".into(), "E4012".into(), "--json".into()], "memory/2026-11-29.md"),
                            1 => (vec!["get".into(), "MEMORY.md".into()], "Mac Studio"),
                            2 => (vec!["recall".into(), "where does the gateway run".into()], ""),
                            3 => (vec!["status".into(), "--json".into()], "\"backend\""),
                            _ => (vec!["append".into(), format!("round {round} note {i} about capybaras")], "Appended to memory/"),
                        };
                        let args: Vec<&str> = args.iter().map(String::as_str).collect();
                        let o = env.ok(&args);
                        let out = String::from_utf8_lossy(&o.stdout);
                        assert!(out.contains(expect), "{args:?} answered {out}");
                    })
                })
                .collect();
            for r in runs {
                r.join().unwrap();
            }
        });
        took.push(started.elapsed());
    }
    assert_eq!(env.requests() - before, asked, "one server request per command that asks it");
    let o = env.ok(&["search", "capybaras", "--max-results", "20", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(!v["results"].as_array().unwrap().is_empty(), "the appended notes are found: {v}");
    println!("{rounds} rounds, {commands} commands through the shared server, each answered: {}", common::round_times(took));
}

// ---- MCP over HTTP ----

struct HttpServer {
    child: std::process::Child,
    port: u16,
    token: String,
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn serve_http(env: &Env, extra: &[&str]) -> HttpServer {
    let mut child = env.cmd().args(["serve", "--http", "127.0.0.1:0"]).args(extra).stdin(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    while !line.contains("MCP over HTTP on") {
        line.clear();
        assert!(err.read_line(&mut line).unwrap() > 0, "the server exited");
    }
    std::thread::spawn(move || std::io::copy(&mut err, &mut std::io::sink()));
    let port = line.split("127.0.0.1:").nth(1).unwrap().split('/').next().unwrap().parse().unwrap();
    let token = fs::read_to_string(env.state().join("mcp-http.token")).unwrap().trim().to_string();
    HttpServer { child, port, token }
}

fn post(port: u16, headers: &[(&str, &str)], body: &[u8]) -> HttpReply {
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let mut req = format!("POST /mcp HTTP/1.1\r\nContent-Length: {}\r\nConnection: close\r\n", body.len());
    if !headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("host")) {
        req.push_str(&format!("Host: 127.0.0.1:{port}\r\n"));
    }
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    // A server that refuses a request may close before reading it all: what it answers is the test.
    let _ = s.write_all(req.as_bytes());
    let _ = s.write_all(body);
    let mut raw = Vec::new();
    let _ = s.read_to_end(&mut raw);
    HttpReply::parse(&raw).unwrap_or_else(|e| panic!("POST /mcp: {e}"))
}

/// The JSON-RPC message of an SSE or JSON reply.
fn message(body: &str) -> serde_json::Value {
    body.lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .map(str::trim)
        .find(|d| d.starts_with('{'))
        .or_else(|| Some(body.trim()))
        .and_then(|d| serde_json::from_str(d).ok())
        .unwrap_or_else(|| panic!("no JSON-RPC message in {body:?}"))
}

const INIT: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"test","version":"1"}}}"#;
const ACCEPT: (&str, &str) = ("Accept", "application/json, text/event-stream");
const JSON: (&str, &str) = ("Content-Type", "application/json");

#[test]
fn http_refuses_missing_or_wrong_tokens_foreign_hosts_and_origins_and_big_bodies() {
    let env = Env::new();
    let srv = serve_http(&env, &[]);
    assert_eq!(mode(&env.state().join("mcp-http.token")), 0o600);
    assert!(srv.token.len() >= 32);
    let bearer = format!("Bearer {}", srv.token);
    let auth = ("Authorization", bearer.as_str());
    assert_eq!(post(srv.port, &[ACCEPT, JSON], INIT.as_bytes()).status, 401);
    let r = post(srv.port, &[ACCEPT, JSON, ("Authorization", "Bearer not-the-token-at-all-0000000000")], INIT.as_bytes());
    assert_eq!(r.status, 401);
    assert!(r.head.to_ascii_lowercase().contains("www-authenticate: bearer"));
    assert_eq!(post(srv.port, &[ACCEPT, JSON, ("Authorization", &srv.token)], INIT.as_bytes()).status, 401);
    assert_eq!(post(srv.port, &[ACCEPT, JSON, auth, ("Host", "evil.example")], INIT.as_bytes()).status, 403);
    assert_eq!(post(srv.port, &[ACCEPT, JSON, auth, ("Host", &format!("attacker.example:{}", srv.port))], INIT.as_bytes()).status, 403);
    assert_eq!(post(srv.port, &[ACCEPT, JSON, auth, ("Origin", "http://evil.example")], INIT.as_bytes()).status, 403);
    assert_eq!(post(srv.port, &[ACCEPT, JSON, auth, ("Origin", &format!("http://evil.example:{}", srv.port))], INIT.as_bytes()).status, 403);
    let big = vec![b' '; 2 << 20];
    assert_eq!(post(srv.port, &[ACCEPT, JSON, auth], &big).status, 413);
    // The server's own Host and Origin, with the token: answered.
    let own = format!("http://localhost:{}", srv.port);
    let r = post(srv.port, &[ACCEPT, JSON, auth, ("Host", &format!("localhost:{}", srv.port)), ("Origin", &own)], INIT.as_bytes());
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(message(&r.body)["result"]["serverInfo"]["name"], "memory");
}

#[test]
fn http_never_binds_beyond_loopback_unless_asked() {
    let env = Env::new();
    let o = env.run(&["serve", "--http", "0.0.0.0:0"]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("--allow-remote"), "{}", String::from_utf8_lossy(&o.stderr));
    // The default address is loopback.
    let help = env.ok(&["serve", "--help"]);
    assert!(String::from_utf8_lossy(&help.stdout).contains("127.0.0.1:8765"));
    // A token file others can read is refused.
    let loose = env.dir.path().join("token");
    fs::write(&loose, "0123456789abcdef0123456789abcdef\n").unwrap();
    fs::set_permissions(&loose, fs::Permissions::from_mode(0o644)).unwrap();
    let o = env.run(&["serve", "--http", "127.0.0.1:0", "--token-file", loose.to_str().unwrap()]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("chmod 600"), "{}", String::from_utf8_lossy(&o.stderr));
}

#[test]
fn http_tools_answer_as_the_command_does() {
    let env = Env::new();
    env.ok(&["index"]);
    let srv = serve_http(&env, &[]);
    let bearer = format!("Bearer {}", srv.token);
    let auth = ("Authorization", bearer.as_str());
    let r = post(srv.port, &[ACCEPT, JSON, auth], INIT.as_bytes());
    assert_eq!(r.status, 200);
    let session = r.header("mcp-session-id").expect("a session id").to_string();
    let sid = ("Mcp-Session-Id", session.as_str());
    let r = post(srv.port, &[ACCEPT, JSON, auth, sid], br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
    assert_eq!(r.status, 202, "{}", r.body);
    let call = r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"memory_search","arguments":{"query":"which error did I fix in billing?"}}}"#;
    let r = post(srv.port, &[ACCEPT, JSON, auth, sid], call.as_bytes());
    assert_eq!(r.status, 200, "{}", r.body);
    let m = message(&r.body);
    let got = &m["result"]["structuredContent"];
    let cli: serde_json::Value =
        serde_json::from_slice(&env.ok(&["--no-server", "search", "which error did I fix in billing?", "--json"]).stdout).unwrap();
    assert_eq!(got, &cli);
    assert_eq!(got["results"][0]["path"], "memory/2026-11-29.md");
    // memory_append is not offered without --allow-append.
    let r = post(srv.port, &[ACCEPT, JSON, auth, sid], br#"{"jsonrpc":"2.0","id":3,"method":"tools/list"}"#);
    let names: Vec<String> =
        message(&r.body)["result"]["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap().to_string()).collect();
    assert!(
        names.contains(&"memory_search".to_string()) && names.contains(&"memory_get".to_string()) && !names.contains(&"memory_append".to_string()),
        "{names:?}"
    );
}

// ---- the OpenClaw plugin's shared-server setting ----

fn node() -> PathBuf {
    let p = std::env::var_os("MEMORY_OPENCLAW_NODE")
        .map_or_else(|| PathBuf::from(std::env::var_os("HOME").expect("HOME")).join(".cache/memory-rs/node24/bin/node"), PathBuf::from);
    assert!(p.is_file(), "{} not found - run `eval \"$(bash scripts/setup.sh | grep '^export ')\"` first", p.display());
    p
}

/// With `sharedServer`, the plugin's engine for a workspace runs one-shot commands (no `memory serve` child), which
/// the shared server answers: the same payloads as the tools, errors with their kind.
#[test]
fn the_openclaw_plugin_can_answer_through_the_shared_server() {
    let env = Env::new();
    env.ok(&["index"]);
    env.start();
    let engine_js = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../integrations/openclaw/lib/engine.js").canonicalize().unwrap();
    let script = format!(
        r#"
import {{ EnginePool, OneShotEngine }} from {engine:?};
const pool = new EnginePool({{ command: {bin:?}, args: ["--state-dir", {state:?}], timeoutMs: 8000, sharedServer: true }});
const engine = pool.get("main", {ws:?});
const out = {{ oneShot: engine instanceof OneShotEngine }};
out.search = await engine.callTool("memory_search", {{ query: "-- which error did I fix in billing?", maxResults: 3 }});
out.get = await engine.callTool("memory_get", {{ path: "MEMORY.md", from: 3, lines: 1 }});
try {{ await engine.callTool("memory_search", {{ query: "   " }}); out.empty = "answered"; }} catch (e) {{ out.empty = e.kind; }}
try {{ await engine.callTool("memory_get", {{ path: "../etc/passwd" }}); out.outside = "answered"; }} catch (e) {{ out.outside = e.kind; }}
pool.closeAll();
console.log(JSON.stringify(out));
"#,
        engine = engine_js.display().to_string(),
        bin = env!("CARGO_BIN_EXE_memory"),
        state = env.state().display().to_string(),
        ws = env.ws().display().to_string(),
    );
    let before = env.requests();
    let o = Command::new(node())
        .args(["--input-type=module", "-e", &script])
        .env_remove("MEMORY_CONFIG")
        .env_remove("RUST_LOG")
        .env("OPENCLAW_STATE_DIR", env.state().join("no-openclaw"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["oneShot"], true);
    let cli: serde_json::Value = serde_json::from_slice(
        &env.ok(&["--no-server", "search", "--max-results", "3", "--json", "--", "-- which error did I fix in billing?"]).stdout,
    )
    .unwrap();
    assert_eq!(v["search"], cli);
    assert_eq!(v["search"]["results"][0]["path"], "memory/2026-11-29.md");
    assert_eq!(v["get"]["text"], "The gateway runs on the Mac Studio.");
    assert_eq!(v["empty"], "invalid_input");
    assert_eq!(v["outside"], "refused", "{v}");
    // The searches went through the server (the get reads the file itself, no engine).
    assert!(env.requests() >= before + 2, "{}", env.status());
}

/// `MEMORY_NO_SERVER` takes the usual spellings of a switch: `1` / `yes` / `true` answer here, `0` / `no` / `false`
/// ask the server. (`1` made every command exit with a usage error: clap read it as `true`/`false` only.)
#[test]
fn no_server_from_the_environment_takes_the_usual_spellings() {
    let env = Env::new();
    env.ok(&["index"]);
    env.start();
    for (value, asks_server) in [("1", false), ("yes", false), ("true", false), ("0", true), ("no", true), ("false", true)] {
        let before = env.requests();
        let o = env.cmd().args(["search", "gateway", "--json"]).env("MEMORY_NO_SERVER", value).stdin(Stdio::null()).output().unwrap();
        assert!(o.status.success(), "MEMORY_NO_SERVER={value}: {}", String::from_utf8_lossy(&o.stderr));
        assert!(String::from_utf8_lossy(&o.stdout).contains("gateway"), "MEMORY_NO_SERVER={value}");
        let after = env.requests();
        assert_eq!(after == before + 1, asks_server, "MEMORY_NO_SERVER={value}: requests {before} -> {after}");
    }
}

/// Tool calls of every kind in flight together over HTTP (each its own request, as a client with parallel tool
/// calls sends them): every one answered once, with its own id, none with an error. `MEMORY_HTTP_STRESS_ROUNDS`
/// sets the rounds (the benchmark figure in docs/BENCHMARKS.md is 10,000 of them); the round times are printed.
#[test]
fn http_calls_in_flight_together_are_each_answered_once() {
    let env = Env::new();
    let srv = serve_http(&env, &["--allow-append"]);
    let bearer = format!("Bearer {}", srv.token);
    let auth = ("Authorization", bearer.as_str());
    let r = post(srv.port, &[ACCEPT, JSON, auth], INIT.as_bytes());
    assert_eq!(r.status, 200, "{}", r.body);
    let session = r.header("mcp-session-id").expect("a session id").to_string();
    let sid = ("Mcp-Session-Id", session.as_str());
    assert_eq!(post(srv.port, &[ACCEPT, JSON, auth, sid], br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#).status, 202);
    let calls = [
        ("memory_search", serde_json::json!({"query": "E4012"})),
        ("memory_get", serde_json::json!({"path": "MEMORY.md"})),
        ("memory_recall", serde_json::json!({"message": "billing error"})),
        ("memory_append", serde_json::json!({"text": "an appended note about capybaras"})),
    ];
    let mut id = 10;
    let rounds: usize = std::env::var("MEMORY_HTTP_STRESS_ROUNDS").ok().and_then(|v| v.parse().ok()).unwrap_or(30);
    let mut took = Vec::with_capacity(rounds);
    for round in 0..rounds {
        let n = 2 + (round * 7) % 15;
        let started = std::time::Instant::now();
        std::thread::scope(|s| {
            let answers: Vec<_> = (0..n)
                .map(|i| {
                    id += 1;
                    let (name, args) = &calls[(round + i) % calls.len()];
                    let body = serde_json::json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": name, "arguments": args}});
                    let port = srv.port;
                    (id, s.spawn(move || post(port, &[ACCEPT, JSON, auth, sid], body.to_string().as_bytes())))
                })
                .collect();
            for (id, answer) in answers {
                let r = answer.join().unwrap();
                assert_eq!(r.status, 200, "call {id}: {}", r.body);
                let m = message(&r.body);
                assert_eq!(m["id"], id, "{m}");
                assert!(m.get("error").is_none() && m["result"]["isError"] != true, "call {id} failed: {m}");
            }
        });
        took.push(started.elapsed());
    }
    println!("{rounds} rounds, {} calls, each answered once: {}", id - 10, common::round_times(took));
}
