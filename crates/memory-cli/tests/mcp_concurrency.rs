//! Tool calls in flight together over MCP stdio, as agents send them: rounds of 2-16 calls of every tool written
//! back to back without waiting, on a fresh engine and a warm one; every id must be answered exactly once, within
//! a bound, and none with an error. The client is raw JSON-RPC lines, so ids and timing are the test's own.
//!
//! `MEMORY_MCP_STRESS_ROUNDS` sets the warm rounds and `MEMORY_MCP_FRESH_ROUNDS` the fresh ones (each a new server on a
//! new workspace); the benchmark figures in docs/BENCHMARKS.md are 10,000 and 1,000 of them.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

mod common;

/// How long a call may take before it counts as never answered.
const ANSWER_WITHIN: Duration = Duration::from_secs(30);

/// A `memory serve --allow-append` process and the answers it writes, by id.
struct Server {
    child: Child,
    stdin: ChildStdin,
    answers: mpsc::Receiver<Value>,
    next_id: u64,
    /// The answers of the last round.
    last: Vec<Value>,
}

impl Server {
    fn start(dirs: &conformance::testing::TestDirs, config: Option<&std::path::Path>) -> Server {
        let mut child = common::memory(dirs.ws.path(), dirs.state.path(), config)
            .args(["serve", "--allow-append"])
            .env("MEMORY_NO_SERVER", "1")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, answers) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                let Ok(v) = serde_json::from_str::<Value>(&line) else { continue };
                if tx.send(v).is_err() {
                    break;
                }
            }
        });
        let mut s = Server { child, stdin, answers, next_id: 1, last: Vec::new() };
        // The handshake, and the calls after it, in one write: a client that does not wait for the answer.
        s.write(&[
            json!({"jsonrpc": "2.0", "id": 0, "method": "initialize",
                   "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "stress", "version": "1"}}}),
            json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        ]);
        s
    }

    fn write(&mut self, messages: &[Value]) {
        let text: String = messages.iter().map(|m| format!("{m}\n")).collect();
        self.stdin.write_all(text.as_bytes()).unwrap();
        self.stdin.flush().unwrap();
    }

    /// Send `calls` (tool name, arguments) back to back; wait for their answers. Returns how long the last took.
    fn round(&mut self, calls: &[(&str, Value)], seen: &mut HashMap<u64, usize>) -> Duration {
        let first = self.next_id;
        let messages: Vec<Value> = calls
            .iter()
            .map(|(name, args)| {
                let id = self.next_id;
                self.next_id += 1;
                json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": name, "arguments": args}})
            })
            .collect();
        let started = Instant::now();
        self.write(&messages);
        let wanted = first..self.next_id;
        self.last.clear();
        while !wanted.clone().all(|id| seen.contains_key(&id)) {
            let left = ANSWER_WITHIN.saturating_sub(started.elapsed());
            let Ok(answer) = self.answers.recv_timeout(left) else {
                let missing: Vec<u64> = wanted.clone().filter(|id| !seen.contains_key(id)).collect();
                panic!("calls {missing:?} of {calls:?} were not answered within {ANSWER_WITHIN:?}");
            };
            let Some(id) = answer["id"].as_u64() else { panic!("an answer without a numeric id: {answer}") };
            *seen.entry(id).or_default() += 1;
            assert!(answer.get("error").is_none() && answer["result"]["isError"] != json!(true), "call {id} failed: {answer}");
            if wanted.contains(&id) {
                self.last.push(answer);
            }
        }
        started.elapsed()
    }

    fn stop(mut self, seen: &HashMap<u64, usize>) {
        drop(self.stdin);
        // Whatever is still written is a second answer.
        if let Some(answer) = self.answers.iter().next() {
            panic!("an answer after every call was answered: {answer}");
        }
        let _ = self.child.wait();
        let twice: Vec<_> = seen.iter().filter(|(_, n)| **n > 1).collect();
        assert!(twice.is_empty(), "answered more than once: {twice:?}");
    }
}

/// A small deterministic generator (the rounds are the same on every run).
struct Lcg(u64);

impl Lcg {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (self.0 >> 33) % n
    }
}

/// Calls of every tool, `n` of them.
fn mixed_calls(rng: &mut Lcg, n: usize) -> Vec<(&'static str, Value)> {
    (0..n)
        .map(|i| match rng.below(4) {
            0 => ("memory_search", json!({"query": "gateway Mac Studio"})),
            1 => ("memory_get", json!({"path": "MEMORY.md"})),
            2 => ("memory_recall", json!({"message": "where does the gateway run"})),
            _ => ("memory_append", json!({"text": format!("stress note {i}")})),
        })
        .collect()
}

#[test]
fn calls_sent_together_are_each_answered_once() {
    let rounds: usize = std::env::var("MEMORY_MCP_STRESS_ROUNDS").ok().and_then(|v| v.parse().ok()).unwrap_or(150);
    let fresh: usize = std::env::var("MEMORY_MCP_FRESH_ROUNDS").ok().and_then(|v| v.parse().ok()).unwrap_or(4);
    let mut rng = Lcg(0x5eed);
    // Fresh engines: the calls arrive with the handshake, before the index exists.
    let mut took = Vec::with_capacity(fresh);
    let mut calls = 0;
    for _ in 0..fresh {
        let dirs = common::workspace(&[("memory/2026-11-30.md", "# 2026-11-30\n\n- Lunch with Alice\n")]);
        let mut server = Server::start(&dirs, None);
        let mut seen = HashMap::new();
        let n = 2 + rng.below(15) as usize;
        calls += n;
        took.push(server.round(&mixed_calls(&mut rng, n), &mut seen));
        server.stop(&seen);
    }
    eprintln!("mcp stdio, fresh engines: {fresh} rounds, {calls} calls, all answered once; {}", common::round_times(took));
    // A warm engine: rounds of 2-16 calls.
    let dirs = common::workspace(&[("memory/2026-11-30.md", "# 2026-11-30\n\n- Lunch with Alice\n")]);
    let mut server = Server::start(&dirs, None);
    let mut seen = HashMap::new();
    let mut took = Vec::with_capacity(rounds);
    let mut calls = 0;
    for _ in 0..rounds {
        let n = 2 + rng.below(15) as usize;
        calls += n;
        took.push(server.round(&mixed_calls(&mut rng, n), &mut seen));
    }
    server.stop(&seen);
    eprintln!("mcp stdio: {rounds} rounds, {calls} calls, all answered once; {}", common::round_times(took));
}

/// Searches sent with the handshake to a new workspace whose provider takes longer than a search waits for a batch of notes: the
/// watcher's first sync and the searches' own take turns with the index, and every search answers with the note
/// (by its words), none with "another sync is still updating the index".
#[test]
fn searches_sent_together_to_a_new_workspace_on_a_slow_provider_all_answer() {
    let base_url = common::slow_embedding_server(Duration::from_secs(8));
    for _ in 0..3 {
        let notes: Vec<(String, String)> =
            (0..30).map(|i| (format!("memory/harbour-{i}.md"), format!("# Note {i}\n\n- Harbour project step {i}\n"))).collect();
        let notes: Vec<(&str, &str)> = notes.iter().map(|(p, t)| (p.as_str(), t.as_str())).collect();
        let dirs = common::workspace(&notes);
        let config = dirs.state.path().join("config.json5");
        let provider = json!({ "memory": { "search": { "provider": "openai-compatible", "model": "m", "remote": { "baseUrl": base_url } } } });
        std::fs::write(&config, provider.to_string()).unwrap();
        let mut server = Server::start(&dirs, Some(&config));
        let mut seen = HashMap::new();
        let searches: Vec<(&str, Value)> = (0..4).map(|_| ("memory_search", json!({"query": "gateway Mac Studio"}))).collect();
        server.round(&searches, &mut seen);
        for answer in &server.last {
            let top = &answer["result"]["structuredContent"]["results"][0]["path"];
            assert_eq!(top, "MEMORY.md", "{answer}");
        }
        server.stop(&seen);
    }
}
