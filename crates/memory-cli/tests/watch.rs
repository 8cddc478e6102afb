//! `memory watch`: changes are picked up within a few debounce periods, and a burst of writes causes a bounded
//! number of syncs. The watcher prints one JSON line per sync (`--json`); the tests count them.

use std::fs;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use conformance::testing::TestDirs;
use serde_json::Value;

mod common;

const DEBOUNCE_MS: u64 = 200;

struct Watcher {
    child: Child,
    lines: mpsc::Receiver<Value>,
}

impl Drop for Watcher {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Watcher {
    fn start(ws: &Path, state: &Path) -> Watcher {
        let cfg = state.join("config.json5");
        fs::write(&cfg, format!("{{ memory: {{ search: {{ sync: {{ watchDebounceMs: {DEBOUNCE_MS} }} }} }} }}")).unwrap();
        let mut child = Command::new(env!("CARGO_BIN_EXE_memory"))
            .arg("--workspace")
            .arg(ws)
            .arg("--state-dir")
            .arg(state)
            .arg("--config")
            .arg(&cfg)
            .args(["watch", "--json"])
            .env_remove("RUST_LOG")
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let out = child.stdout.take().unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines() {
                let Ok(line) = line else { break };
                let v: Value = serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON: {line}: {e}"));
                if tx.send(v).is_err() {
                    break;
                }
            }
        });
        let mut w = Watcher { child, lines: rx };
        // The initial sync comes before "ready".
        let first = w.next(Duration::from_secs(20)).expect("no output from memory watch");
        assert_eq!(first["event"], "sync", "{first}");
        assert_eq!(first["trigger"], "start", "{first}");
        let ready = w.next(Duration::from_secs(5)).expect("no ready line");
        assert_eq!(ready["event"], "ready", "{ready}");
        assert_eq!(ready["debounceMs"], DEBOUNCE_MS);
        w
    }

    fn next(&mut self, timeout: Duration) -> Option<Value> {
        self.lines.recv_timeout(timeout).ok()
    }

    /// The next sync that changed something, within `timeout`.
    fn next_change(&mut self, timeout: Duration) -> Value {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let v = self.next(left).unwrap_or_else(|| panic!("no sync with changes within {timeout:?}"));
            let r = &v["report"];
            let n = r["filesAdded"].as_u64().unwrap_or(0) + r["filesChanged"].as_u64().unwrap_or(0) + r["filesRemoved"].as_u64().unwrap_or(0);
            if v["event"] == "sync" && n > 0 {
                return v;
            }
        }
    }

    /// All lines until the watcher has been quiet for `quiet`.
    fn drain(&mut self, quiet: Duration) -> Vec<Value> {
        let mut all = Vec::new();
        while let Some(v) = self.next(quiet) {
            all.push(v);
        }
        all
    }
}

fn workspace() -> (tempfile::TempDir, tempfile::TempDir) {
    let TestDirs { ws, state } = common::workspace(&[]);
    (ws, state)
}

fn search(ws: &Path, state: &Path, query: &str) -> Value {
    let o = Command::new(env!("CARGO_BIN_EXE_memory"))
        .arg("--workspace")
        .arg(ws)
        .arg("--state-dir")
        .arg(state)
        .args(["search", query, "--json"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_slice(&o.stdout).unwrap()
}

fn paths(v: &Value) -> Vec<String> {
    v["results"].as_array().unwrap().iter().map(|r| r["path"].as_str().unwrap().to_string()).collect()
}

#[test]
fn picks_up_create_modify_delete_rename() {
    let (ws, state) = workspace();
    let mut w = Watcher::start(ws.path(), state.path());
    let within = Duration::from_millis(DEBOUNCE_MS * 15);

    fs::write(ws.path().join("memory/2026-11-30.md"), "# 2026-11-30\n\n- Met the wombat team\n").unwrap();
    let ev = w.next_change(within);
    assert_eq!(ev["trigger"], "files");
    assert_eq!(ev["report"]["filesAdded"], 1, "{ev}");
    assert_eq!(paths(&search(ws.path(), state.path(), "wombat")), vec!["memory/2026-11-30.md"]);

    fs::write(ws.path().join("memory/2026-11-30.md"), "# 2026-11-30\n\n- Met the platypus team\n").unwrap();
    let ev = w.next_change(within);
    assert_eq!(ev["report"]["filesChanged"], 1, "{ev}");
    assert_eq!(paths(&search(ws.path(), state.path(), "platypus")), vec!["memory/2026-11-30.md"]);
    assert!(paths(&search(ws.path(), state.path(), "wombat")).is_empty());

    fs::rename(ws.path().join("memory/2026-11-30.md"), ws.path().join("memory/team.md")).unwrap();
    let ev = w.next_change(within);
    assert_eq!((ev["report"]["filesAdded"].as_u64(), ev["report"]["filesRemoved"].as_u64()), (Some(1), Some(1)), "{ev}");
    assert_eq!(paths(&search(ws.path(), state.path(), "platypus")), vec!["memory/team.md"]);

    // A new sub-folder's notes, and MEMORY.md at the root.
    fs::create_dir(ws.path().join("memory/projects")).unwrap();
    fs::write(ws.path().join("memory/projects/echidna.md"), "Echidna launch plan\n").unwrap();
    let ev = w.next_change(within);
    assert_eq!(ev["report"]["filesAdded"], 1, "{ev}");
    fs::write(ws.path().join("MEMORY.md"), "# Memory\n\nThe gateway moved to the numbat server.\n").unwrap();
    let ev = w.next_change(within);
    assert_eq!(ev["report"]["filesChanged"], 1, "{ev}");
    assert_eq!(paths(&search(ws.path(), state.path(), "numbat")), vec!["MEMORY.md"]);

    fs::remove_file(ws.path().join("memory/team.md")).unwrap();
    let ev = w.next_change(within);
    assert_eq!(ev["report"]["filesRemoved"], 1, "{ev}");
    assert!(paths(&search(ws.path(), state.path(), "platypus")).is_empty());

    // Files that are not memory files cause no sync at all.
    fs::write(ws.path().join("README.md"), "not memory\n").unwrap();
    fs::write(ws.path().join("memory/.scratch.swp"), "editor junk\n").unwrap();
    let extra = w.drain(Duration::from_millis(DEBOUNCE_MS * 5));
    assert!(extra.is_empty(), "{extra:?}");
}

#[test]
fn a_burst_of_500_writes_causes_a_bounded_number_of_syncs() {
    let (ws, state) = workspace();
    let mut w = Watcher::start(ws.path(), state.path());
    let started = Instant::now();
    // 500 writes: 100 notes, each rewritten 5 times, as fast as the file system takes them.
    for round in 0..5 {
        for i in 0..100 {
            fs::write(ws.path().join(format!("memory/note-{i:03}.md")), format!("# Note {i}\n\nround{round} token{i}x\n")).unwrap();
        }
    }
    let burst = started.elapsed();
    // Let it settle: syncs until the watcher has been quiet for several debounce periods.
    let events = w.drain(Duration::from_millis(DEBOUNCE_MS * 8));
    let syncs: Vec<&Value> = events.iter().filter(|e| e["event"] == "sync").collect();
    let added: u64 = syncs.iter().map(|e| e["report"]["filesAdded"].as_u64().unwrap_or(0)).sum();
    let changes: u64 = syncs.iter().map(|e| e["changes"].as_u64().unwrap_or(0)).sum();
    eprintln!("burst of 500 writes in {burst:?}: {} syncs ({changes} file events coalesced)", syncs.len());
    assert_eq!(added, 100, "{syncs:?}");
    // One sync per debounce window at most: the burst lasts a fraction of a second here, so a handful.
    let bound = 3 + (burst.as_millis() as u64 / (DEBOUNCE_MS * watch_max_wait_factor())) as usize;
    assert!(!syncs.is_empty() && syncs.len() <= bound, "{} syncs for 500 writes (bound {bound})", syncs.len());
    // The index holds the last version of every note.
    let v = search(ws.path(), state.path(), "token42x");
    assert_eq!(paths(&v).first().map(String::as_str), Some("memory/note-042.md"), "{v}");
    assert!(v["results"][0]["snippet"].as_str().unwrap().contains("round4"), "{v}");
    let v = search(ws.path(), state.path(), "round0");
    assert!(v["results"].as_array().unwrap().iter().all(|r| !r["snippet"].as_str().unwrap().contains("round0")), "{v}");
}

/// Mirrors `watch::MAX_WAIT_FACTOR` in the binary: under continuous writes, one sync per this many debounces.
fn watch_max_wait_factor() -> u64 {
    10
}
