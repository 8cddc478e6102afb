//! `memory serve` at the protocol level, as a hostile or careless client drives it: raw lines on its stdin,
//! the answers read from its stdout. Every request with an id gets exactly one answer (lines that cannot be
//! parsed included), the server never dies, and its memory stays bounded; a fuzz run sends thousands of
//! generated lines (arbitrary bytes, broken and valid JSON-RPC) and checks all three.

use std::collections::HashMap;
use std::fs;
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use conformance::testing::TestDirs;
use serde_json::{json, Value};

mod common;

const LIMIT: Duration = Duration::from_secs(60);

struct Server {
    child: Child,
    stdin: Option<ChildStdin>,
    answers: mpsc::Receiver<Value>,
    /// Answers read but not yet asked for.
    pending: Vec<Value>,
    ws: tempfile::TempDir,
    state: tempfile::TempDir,
}

impl Server {
    fn start() -> Server {
        Server::start_with(&[])
    }

    fn start_with(extra: &[&str]) -> Server {
        let TestDirs { ws, state } = common::workspace(&[("memory/2026-11-29.md", "# 2026-11-29\n\n- Fixed error E4012 in billing\n")]);
        let cfg = state.path().join("cfg.json");
        fs::write(&cfg, r#"{"memory":{"search":{"provider":"none"}}}"#).unwrap();
        let mut child = Command::new(env!("CARGO_BIN_EXE_memory"))
            .arg("--workspace")
            .arg(ws.path())
            .arg("--state-dir")
            .arg(state.path())
            .arg("--config")
            .arg(&cfg)
            .args(["serve", "--no-watch"])
            .args(extra)
            .env_remove("MEMORY_CONFIG")
            .env_remove("MEMORY_ALLOW_APPEND")
            .env_remove("RUST_LOG")
            .env("OPENCLAW_STATE_DIR", state.path().join("no-openclaw"))
            .env_remove("OPENCLAW_CONFIG_PATH")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::from(fs::File::create(state.path().join("stderr.log")).unwrap()))
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, answers) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).split(b'\n') {
                let Ok(line) = line else { break };
                // Anything but one JSON object per line is a broken answer: kept as a string to fail the check.
                let v = serde_json::from_slice::<Value>(&line).unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&line).into_owned()));
                if tx.send(v).is_err() {
                    break;
                }
            }
        });
        let stdin = child.stdin.take();
        Server { child, stdin, answers, pending: Vec::new(), ws, state }
    }

    fn send(&mut self, line: &[u8]) {
        let stdin = self.stdin.as_mut().unwrap();
        stdin.write_all(line).unwrap();
        stdin.write_all(b"\n").unwrap();
        stdin.flush().unwrap();
    }

    fn send_json(&mut self, v: Value) {
        self.send(v.to_string().as_bytes());
    }

    /// The answer to `id` (waiting at most [`LIMIT`]).
    fn answer(&mut self, id: &Value) -> Value {
        let deadline = Instant::now() + LIMIT;
        loop {
            if let Some(i) = self.pending.iter().position(|a| &a["id"] == id) {
                return self.pending.remove(i);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            match self.answers.recv_timeout(left) {
                Ok(a) => self.pending.push(a),
                Err(_) => panic!("no answer to id {id} within {LIMIT:?}; stderr: {}", self.stderr()),
            }
        }
    }

    fn initialize(&mut self) {
        self.send_json(json!({"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"test","version":"1"}}}));
        let a = self.answer(&json!("init"));
        assert!(a["result"]["serverInfo"].is_object(), "{a}");
        self.send_json(json!({"jsonrpc":"2.0","method":"notifications/initialized"}));
    }

    fn stderr(&self) -> String {
        fs::read_to_string(self.state.path().join("stderr.log")).unwrap_or_default()
    }

    /// Peak resident memory of the server, in MiB.
    fn peak_rss_mib(&self) -> u64 {
        let status = fs::read_to_string(format!("/proc/{}/status", self.child.id())).unwrap_or_default();
        status.lines().find(|l| l.starts_with("VmHWM:")).and_then(|l| l.split_whitespace().nth(1)).and_then(|kb| kb.parse::<u64>().ok()).unwrap_or(0)
            / 1024
    }

    /// Close stdin: the server must end on its own, successfully.
    fn finish(mut self) {
        drop(self.stdin.take());
        let deadline = Instant::now() + LIMIT;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                assert!(status.success(), "the server ended with {status}; stderr: {}", self.stderr());
                return;
            }
            assert!(Instant::now() < deadline, "the server did not end when its input closed");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

fn call(id: i64, tool: &str, arguments: Value) -> Value {
    json!({"jsonrpc":"2.0","id":id,"method":"tools/call","params":{"name":tool,"arguments":arguments}})
}

fn error_code(a: &Value) -> i64 {
    a["error"]["code"].as_i64().unwrap_or_else(|| panic!("expected an error answer: {a}"))
}

#[test]
fn requests_that_cannot_be_parsed_are_answered() {
    let mut s = Server::start();
    s.initialize();
    // NaN (and Infinity) are not JSON: a parse error, answered for the id the text carries.
    s.send(br#"{"jsonrpc":"2.0","id":11,"method":"tools/call","params":{"name":"memory_search","arguments":{"query":"gateway","maxResults":NaN}}}"#);
    assert_eq!(error_code(&s.answer(&json!(11))), -32700);
    s.send(br#"{"jsonrpc":"2.0","id":"x-12","method":"tools/call","params":{"name":"memory_search","arguments":{"query":"gateway","minScore":-Infinity}}}"#);
    assert_eq!(error_code(&s.answer(&json!("x-12"))), -32700);
    // Not JSON at all, no id to read: answered with id null.
    s.send(b"{this is not json");
    assert_eq!(error_code(&s.answer(&Value::Null)), -32700);
    // A lone surrogate (JavaScript's JSON.stringify of a cut emoji) is read as U+FFFD: the search answers.
    s.send(br#"{"jsonrpc":"2.0","id":13,"method":"tools/call","params":{"name":"memory_search","arguments":{"query":"gateway \ud800"}}}"#);
    let a = s.answer(&json!(13));
    assert_eq!(a["result"]["structuredContent"]["results"][0]["path"], "MEMORY.md", "{a}");
    // A line over the 16 MiB limit: answered for its id, not just logged.
    let mut big = br#"{"jsonrpc":"2.0","id":14,"method":"tools/call","params":{"name":"memory_search","arguments":{"query":""#.to_vec();
    big.extend(std::iter::repeat_n(b'x', 17 << 20));
    big.extend_from_slice(br#""}}}"#);
    s.send(&big);
    let a = s.answer(&json!(14));
    assert_eq!(error_code(&a), -32700);
    assert!(a["error"]["message"].as_str().unwrap().contains("16 MiB"), "{a}");
    // tools/call without params: invalid params, not "method not found".
    s.send(br#"{"jsonrpc":"2.0","id":15,"method":"tools/call"}"#);
    assert_eq!(error_code(&s.answer(&json!(15))), -32602);
    // Arguments that do not fit the schema: a tool error in the documented shape.
    for (id, tool, args) in [
        (16, "memory_search", json!({"querry": "gateway"})),
        (17, "memory_get", json!({"path": "MEMORY.md", "lines": "two"})),
        (18, "memory_search", json!({"query": 42})),
    ] {
        s.send_json(call(id, tool, args));
        let a = s.answer(&json!(id));
        assert_eq!(a["result"]["isError"], true, "{a}");
        let v = &a["result"]["structuredContent"];
        assert_eq!(v["error"]["kind"], "invalid_input", "{a}");
        assert!(v["error"]["message"].as_str().unwrap().contains("arguments"), "{a}");
    }
    // And the server still answers.
    s.send_json(call(19, "memory_search", json!({"query": "billing error"})));
    let a = s.answer(&json!(19));
    assert_eq!(a["result"]["structuredContent"]["results"][0]["path"], "memory/2026-11-29.md", "{a}");
    s.finish();
}

#[test]
fn requests_before_initialize_get_a_clear_error_and_the_server_lives_on() {
    let mut s = Server::start();
    s.send_json(json!({"jsonrpc":"2.0","id":1,"method":"tools/list"}));
    let a = s.answer(&json!(1));
    assert!(a["error"]["message"].as_str().unwrap().contains("initialize"), "{a}");
    // A notification before initialize ended rmcp's handshake, and the server with it.
    s.send_json(json!({"jsonrpc":"2.0","method":"notifications/initialized"}));
    s.send_json(json!({"jsonrpc":"2.0","id":2,"method":"ping"}));
    assert!(s.answer(&json!(2))["result"].is_object());
    s.initialize();
    s.send_json(json!({"jsonrpc":"2.0","id":3,"method":"tools/list"}));
    assert_eq!(s.answer(&json!(3))["result"]["tools"].as_array().unwrap().len(), 3);
    s.finish();
}

#[test]
fn memory_get_says_when_a_long_line_is_cut_and_reads_the_rest() {
    let mut s = Server::start();
    s.initialize();
    let long: String = (0..30_000).map(|i| char::from(b'a' + (i % 26) as u8)).collect();
    fs::write(s.ws.path().join("memory/long.md"), format!("{long}\nshort line\n")).unwrap();
    s.send_json(call(1, "memory_get", json!({"path": "memory/long.md"})));
    let v = s.answer(&json!(1))["result"]["structuredContent"].clone();
    assert_eq!((v["truncated"].as_bool(), v["nextOffset"].as_u64(), v["lines"].as_u64()), (Some(true), Some(12_000), Some(1)), "{v}");
    assert!(v["note"].as_str().unwrap().contains("offset=12000"), "{v}");
    let mut read = v["text"].as_str().unwrap().to_string();
    let mut next = v["nextOffset"].as_u64();
    let mut id = 2;
    while let Some(offset) = next {
        s.send_json(call(id, "memory_get", json!({"path": "memory/long.md", "from": 1, "lines": 1, "offset": offset})));
        let v = s.answer(&json!(id))["result"]["structuredContent"].clone();
        read.push_str(v["text"].as_str().unwrap());
        next = v["nextOffset"].as_u64();
        id += 1;
    }
    assert_eq!(read, long);
    s.finish();
}

#[test]
fn memory_append_answers_in_bounded_time_while_another_process_holds_the_index() {
    let mut s = Server::start_with(&["--allow-append"]);
    s.initialize();
    s.send_json(call(1, "memory_search", json!({"query": "gateway"})));
    assert!(s.answer(&json!(1))["result"].is_object());
    let lock = find_lock(s.state.path()).expect("the index's lock file");
    let held = fs::File::open(&lock).unwrap();
    held.lock().unwrap();
    let started = Instant::now();
    s.send_json(call(2, "memory_append", json!({"text": "The wombat audit is due in June"})));
    let a = s.answer(&json!(2));
    assert!(started.elapsed() < Duration::from_secs(20), "{:?}", started.elapsed());
    let v = &a["result"]["structuredContent"];
    assert_ne!(a["result"]["isError"], true, "{a}");
    assert_eq!(v["indexed"], false, "{a}");
    assert!(v["warning"].as_str().unwrap().contains("the next search indexes it"), "{a}");
    drop(held);
    s.send_json(call(3, "memory_search", json!({"query": "wombat audit"})));
    let a = s.answer(&json!(3));
    assert_eq!(a["result"]["structuredContent"]["results"][0]["path"], v["path"], "{a}");
    s.finish();
}

fn find_lock(dir: &std::path::Path) -> Option<std::path::PathBuf> {
    for e in fs::read_dir(dir).ok()?.flatten() {
        let p = e.path();
        if p.is_dir() {
            if let Some(l) = find_lock(&p) {
                return Some(l);
            }
        } else if p.extension().is_some_and(|x| x == "lock") {
            return Some(p);
        }
    }
    None
}

/// A small deterministic generator (xorshift): the same lines on every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

/// What the protocol demands of the answer to one line.
#[derive(Debug, Clone, PartialEq)]
enum Expect {
    /// No answer (an empty line, a notification, a response).
    Nothing,
    /// Exactly one answer, with this id.
    Id(Value),
    /// Exactly one answer: with the line's own id if it can be read, else with id null.
    OwnOrNull,
}

/// The protocol's rule for a line, from the JSON-RPC 2.0 spec (independent of how the server reads it).
fn expectation(line: &[u8]) -> Expect {
    let line = line.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(line);
    // JSON's whitespace (space, tab, CR, LF) only.
    let json_ws = |c: &u8| matches!(c, b' ' | b'\t' | b'\r' | b'\n');
    let start = line.iter().position(|c| !json_ws(c)).unwrap_or(line.len());
    let end = line.iter().rposition(|c| !json_ws(c)).map_or(start, |e| e + 1);
    let trimmed = &line[start..end.max(start)];
    if trimmed.is_empty() {
        return Expect::Nothing;
    }
    let Ok(v) = serde_json::from_slice::<Value>(trimmed) else { return Expect::OwnOrNull };
    let Some(obj) = v.as_object() else { return Expect::OwnOrNull };
    match obj.get("method").and_then(Value::as_str) {
        None if obj.contains_key("result") || obj.contains_key("error") => Expect::Nothing,
        None => Expect::OwnOrNull,
        Some(_) => match obj.get("id") {
            None => Expect::Nothing,
            Some(id) if id.is_string() || id.is_number() => Expect::Id(id.clone()),
            Some(_) => Expect::OwnOrNull,
        },
    }
}

fn random_text(r: &mut Rng) -> String {
    let pieces = ["gateway", "billing", " ", "\"", "\\", "é", "会议", "😀", "\u{0}", "\t", "[", "{", "}", "NaN", "\u{fffd}", "x"];
    (0..r.below(8)).map(|_| *r.pick(&pieces)).collect()
}

fn random_json(r: &mut Rng, depth: usize) -> Value {
    match r.below(if depth > 3 { 5 } else { 8 }) {
        0 => Value::Null,
        1 => json!(r.below(2) == 1),
        2 => json!(r.next() as i64),
        3 => json!((r.next() % 10_000) as f64 / 7.0),
        4 => json!(random_text(r)),
        5 => Value::Array((0..r.below(4)).map(|_| random_json(r, depth + 1)).collect()),
        _ => {
            let keys =
                ["query", "path", "from", "lines", "offset", "maxResults", "minScore", "name", "arguments", "method", "result", "jsonrpc", "params"];
            Value::Object((0..r.below(5)).map(|_| (r.pick(&keys).to_string(), random_json(r, depth + 1))).collect())
        }
    }
}

/// A valid request with this id (its text starts with the id, so a mutation after it keeps it readable).
fn valid_request(r: &mut Rng, id: &str) -> String {
    let (method, params) = match r.below(7) {
        0 | 1 => {
            ("tools/call", json!({"name":"memory_search","arguments":{"query": format!("gateway {}", random_text(r)), "maxResults": r.below(8) + 1}}))
        }
        2 => (
            "tools/call",
            json!({"name":"memory_get","arguments":{"path": r.pick(&["MEMORY.md", "memory/2026-11-29.md", "../etc/passwd", "memory/none.md"]), "from": r.below(4), "lines": r.below(3)}}),
        ),
        3 => ("tools/list", json!({})),
        4 => ("ping", json!({})),
        5 => ("tools/call", json!({"name": r.pick(&["memory_append", "nope", ""]), "arguments": random_json(r, 0)})),
        _ => (*r.pick(&["resources/list", "prompts/list", "x/y", ""]), random_json(r, 1)),
    };
    format!(r#"{{"id":"{id}","jsonrpc":"2.0","method":{},"params":{}}}"#, json!(method), params)
}

/// One generated line, carrying the unique id `id` where it has one.
fn generated_line(r: &mut Rng, id: &str) -> Vec<u8> {
    let head = format!(r#"{{"id":"{id}","#);
    match r.below(10) {
        // Valid requests.
        0..=2 => valid_request(r, id).into_bytes(),
        // A valid request, broken after its id: cut, a byte changed or inserted, NaN, a lone surrogate, deep nesting.
        3..=5 => {
            let mut b = valid_request(r, id).into_bytes();
            let at = head.len() + r.below(b.len() - head.len());
            match r.below(7) {
                0 => b.truncate(at),
                1 => b[at] = (r.next() % 256) as u8,
                2 => b.insert(at, *r.pick(b"{}[]\",:\\")),
                3 => b.splice(at..at, b"NaN".iter().copied()).for_each(drop),
                4 => b.splice(at..at, br"\ud800".iter().copied()).for_each(drop),
                5 => {
                    let deep = format!(r#""deep":{}1{},"#, "[".repeat(300 + r.below(5000)), "]".repeat(300));
                    b.splice(head.len()..head.len(), deep.bytes()).for_each(drop);
                }
                _ => b.splice(at..at, b"\xEF\xBB\xBF\xff".iter().copied()).for_each(drop),
            }
            b.retain(|&c| c != b'\n');
            b
        }
        // Arbitrary bytes.
        6 => (0..r.below(200)).map(|_| (r.next() % 256) as u8).filter(|&c| c != b'\n').collect(),
        // Arbitrary JSON, with the id or without.
        7 => {
            let mut v = random_json(r, 0);
            if let (Some(o), true) = (v.as_object_mut(), r.below(2) == 1) {
                o.insert("id".into(), json!(id));
            }
            v.to_string().into_bytes()
        }
        // Notifications, valid and not.
        8 => format!(
            r#"{{"jsonrpc":"2.0","method":{},"params":{}}}"#,
            json!(r.pick(&["notifications/initialized", "notifications/progress", "x"])),
            random_json(r, 1)
        )
        .into_bytes(),
        // Requests with odd ids or versions.
        _ => {
            let id_value = r.pick(&[json!(null), json!(true), json!({"a": 1}), json!([1]), json!(id)]).clone();
            format!(r#"{{"jsonrpc":{},"id":{id_value},"method":"ping"}}"#, r.pick(&[json!("2.0"), json!("1.0"), json!(2)])).into_bytes()
        }
    }
}

#[test]
fn protocol_fuzz_every_request_gets_one_answer_and_the_server_survives() {
    let lines: usize = std::env::var("MCP_FUZZ_LINES").ok().and_then(|n| n.parse().ok()).unwrap_or(3_000);
    let seed: u64 = std::env::var("MCP_FUZZ_SEED").ok().and_then(|n| n.parse().ok()).unwrap_or(0x9e37_79b9_7f4a_7c15);
    let mut r = Rng(seed);
    let mut s = Server::start();
    s.initialize();
    let mut expected: HashMap<String, Expect> = HashMap::new();
    let mut batch: Vec<Vec<u8>> = Vec::with_capacity(lines + 2);
    for n in 0..lines {
        let id = format!("L{n}");
        let line = generated_line(&mut r, &id);
        expected.insert(id, expectation(&line));
        batch.push(line);
    }
    // Two lines over the 16 MiB limit among them.
    for n in [lines, lines + 1] {
        let id = format!("L{n}");
        let mut line = valid_request(&mut r, &id).into_bytes();
        line.splice(line.len() - 1..line.len() - 1, std::iter::repeat_n(b' ', 17 << 20)).for_each(drop);
        expected.insert(id, Expect::OwnOrNull);
        batch.push(line);
    }
    let texts: HashMap<String, String> =
        batch.iter().enumerate().map(|(n, l)| (format!("L{n}"), String::from_utf8_lossy(&l[..l.len().min(400)]).into_owned())).collect();
    // Written from another thread: the server's answers must be read meanwhile, or both sides block.
    let mut stdin = s.stdin.take().unwrap();
    let writer = std::thread::spawn(move || {
        for line in &batch {
            stdin.write_all(line).unwrap();
            stdin.write_all(b"\n").unwrap();
        }
        stdin.write_all(br#"{"jsonrpc":"2.0","id":"end","method":"ping"}"#).unwrap();
        stdin.write_all(b"\n").unwrap();
        stdin.flush().unwrap();
        stdin
    });

    let must_answer: usize = expected.values().filter(|e| **e != Expect::Nothing).count();
    let deadline = Instant::now() + Duration::from_secs(300);
    let mut by_id: HashMap<String, usize> = HashMap::new();
    let mut nulls = 0usize;
    let mut answered = 0usize;
    let mut saw_end = false;
    while answered < must_answer || !saw_end {
        let left = deadline.saturating_duration_since(Instant::now());
        let Ok(a) = s.answers.recv_timeout(left) else {
            let missing: Vec<&String> = expected
                .iter()
                .filter(|(id, e)| matches!(e, Expect::Id(_)) && !by_id.contains_key(*id))
                .filter_map(|(id, _)| texts.get(id))
                .take(5)
                .collect();
            panic!("{answered} of {must_answer} lines answered (end seen: {saw_end}); requests without an answer: {missing:#?}")
        };
        assert_eq!(a["jsonrpc"], "2.0", "not a JSON-RPC answer: {a}");
        assert!(a.get("result").is_some() != a.get("error").is_some(), "an answer has a result or an error: {a}");
        match a.get("id").cloned().unwrap_or(Value::Null) {
            Value::Null => {
                nulls += 1;
                answered += 1;
            }
            Value::String(id) if id == "end" => saw_end = true,
            Value::String(id) => {
                *by_id.entry(id.clone()).or_default() += 1;
                answered += 1;
            }
            other => panic!("an answer to an id never sent: {other} in {a}"),
        }
    }
    // A moment for stray extra answers, then check every line.
    std::thread::sleep(Duration::from_millis(300));
    if let Ok(a) = s.answers.try_recv() {
        panic!("an extra answer: {a}");
    }
    let mut own_or_null_unanswered = 0;
    for (id, e) in &expected {
        let got = by_id.get(id).copied().unwrap_or(0);
        match e {
            Expect::Nothing => assert_eq!(got, 0, "{id} needed no answer"),
            Expect::Id(v) => assert_eq!((got, v), (1, &json!(id)), "{id} needs exactly one answer"),
            Expect::OwnOrNull => {
                assert!(got <= 1, "{id} answered {got} times");
                own_or_null_unanswered += usize::from(got == 0);
            }
        }
    }
    for id in by_id.keys() {
        assert!(expected.contains_key(id), "an answer to an id never sent: {id}");
    }
    assert_eq!(nulls, own_or_null_unanswered, "every line without a readable id gets one answer with id null");
    let peak = s.peak_rss_mib();
    eprintln!(
        "mcp fuzz: {} lines ({} answers: {} by id, {} with id null; {} needed none), peak RSS {peak} MiB",
        lines + 2,
        answered,
        by_id.len(),
        nulls,
        expected.len() - must_answer
    );
    assert!(peak < 1024, "peak RSS {peak} MiB");
    // Still alive: it answers, then ends cleanly when its input closes.
    let stdin = writer.join().unwrap();
    s.stdin = Some(stdin);
    s.send_json(json!({"jsonrpc":"2.0","id":"last","method":"ping"}));
    assert!(s.answer(&json!("last"))["result"].is_object());
    s.finish();
}
