//! Issue 33: what a hostile user tried against the built `memory` command, each a reproduction that failed
//! before its fix: configs that crash, hang or are silently misread; waits without limit on another process's
//! index lock; entries and reads that lose text.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use conformance::testing::TestDirs;
use serde_json::Value;

mod common;

const PLAIN: &str = r#"{"memory":{"search":{"provider":"none"}}}"#;

struct Env {
    ws: tempfile::TempDir,
    state: tempfile::TempDir,
}

impl Env {
    fn new() -> Env {
        let TestDirs { ws, state } = common::workspace(&[]);
        Env { ws, state }
    }

    fn config(&self, text: &str) -> PathBuf {
        let p = self.state.path().join("cfg.json");
        fs::write(&p, text).unwrap();
        p
    }

    fn cmd(&self, config: Option<&Path>) -> Command {
        common::memory(self.ws.path(), self.state.path(), config)
    }

    fn run(&self, config: &str, args: &[&str]) -> Output {
        let p = self.config(config);
        self.cmd(Some(&p)).args(args).output().unwrap()
    }
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// A config error: exit code 1 (not a signal) and one line on stderr naming `needle`.
fn assert_config_error(o: &Output, needle: &str) {
    assert_eq!(o.status.code(), Some(1), "status {:?}, stderr: {}", o.status, stderr(o));
    let e = stderr(o);
    assert!(e.contains(needle), "expected {needle:?} in: {e}");
}

#[test]
fn a_deeply_nested_config_is_a_config_error_not_a_crash() {
    let env = Env::new();
    // Any section, even one this program never reads: the OpenClaw probe parsed the whole file unbounded and the
    // process died of a stack overflow (SIGABRT) before memory-core's own check ran.
    let deep = format!(r#"{{"memory":{{"search":{{"provider":"none"}}}},"gateway":{}1{}}}"#, r#"{"a":"#.repeat(10_000), "}".repeat(10_000));
    let o = env.run(&deep, &["search", "gateway"]);
    assert_config_error(&o, "nested deeper than 128 levels");
    assert!(stderr(&o).contains("cfg.json"), "{}", stderr(&o));
    // The same through OPENCLAW_CONFIG_PATH (the probe of an OpenClaw install) and for `status`.
    let p = env.config(&deep);
    let o = common::memory(env.ws.path(), env.state.path(), None).env("OPENCLAW_CONFIG_PATH", &p).arg("status").output().unwrap();
    assert_config_error(&o, "nested deeper");
}

#[test]
fn a_config_is_read_once_with_a_size_limit() {
    let env = Env::new();
    // /dev/zero never ends: refused at the limit, quickly, instead of growing memory without end.
    let started = Instant::now();
    let o = env.cmd(Some(Path::new("/dev/zero"))).args(["search", "gateway"]).output().unwrap();
    assert_config_error(&o, "larger than 4 MiB");
    assert!(started.elapsed() < Duration::from_secs(10), "{:?}", started.elapsed());
    // A big file: the same clear error, naming the file.
    let big = format!(r#"{{"memory":{{"search":{{"provider":"none"}}}},"pad":"{}"}}"#, "x".repeat(5 << 20));
    let o = env.run(&big, &["search", "gateway"]);
    assert_config_error(&o, "larger than 4 MiB");
    assert!(stderr(&o).contains("cfg.json"), "{}", stderr(&o));
    // A pipe can be read only once: `--config <(echo ...)` works.
    let o = common::isolated(Command::new("bash"), env.state.path())
        .arg("-c")
        .arg(format!(r#"exec "$0" --workspace "$1" --state-dir "$2" --config <(echo '{PLAIN}') search gateway --json"#))
        .arg(env!("CARGO_BIN_EXE_memory"))
        .arg(env.ws.path())
        .arg(env.state.path())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let v: Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["results"][0]["path"], "MEMORY.md", "{v}");
}

#[test]
fn nan_and_infinity_are_refused_by_the_range_checks_naming_the_key() {
    let env = Env::new();
    for (block, key) in [
        ("query: { hybrid: { textWeight: NaN } }", "memory.search.query.hybrid.textWeight"),
        ("query: { hybrid: { vectorWeight: Infinity } }", "memory.search.query.hybrid.vectorWeight"),
        ("query: { minScore: NaN }", "memory.search.query.minScore"),
        ("query: { hybrid: { temporalDecay: { halfLifeDays: Infinity } } }", "memory.search.query.hybrid.temporalDecay.halfLifeDays"),
        ("query: { hybrid: { mmr: { lambda: -Infinity } } }", "memory.search.query.hybrid.mmr.lambda"),
        ("query: { hybrid: { mmr: { lambda: NaN } } }", "memory.search.query.hybrid.mmr.lambda"),
    ] {
        let o = env.run(&format!("{{ memory: {{ search: {{ provider: 'none', {block} }} }} }}"), &["search", "gateway"]);
        assert_config_error(&o, &format!("config error at `{key}`"));
    }
    // An empty store path is a config error naming the key, not an internal error.
    let o = env.run("{ memory: { search: { provider: 'none', store: { path: '' } } } }", &["search", "gateway"]);
    assert_config_error(&o, "config error at `memory.search.store.path`");
}

#[test]
fn per_agent_extra_paths_count_whether_or_not_the_defaults_have_the_key() {
    let env = Env::new();
    fs::create_dir_all(env.ws.path().join("notes")).unwrap();
    fs::write(env.ws.path().join("notes/wombat.md"), "# Wombat\n\nThe wombat service restarts at noon.\n").unwrap();
    fs::create_dir_all(env.ws.path().join("more")).unwrap();
    fs::write(env.ws.path().join("more/koala.md"), "# Koala\n\nThe koala feeds at dusk.\n").unwrap();
    let paths = |config: &str, agent: &str, query: &str| -> Vec<String> {
        let o = env.run(config, &["--agent", agent, "search", query, "--json"]);
        assert!(o.status.success(), "{}", stderr(&o));
        let v: Value = serde_json::from_str(&stdout(&o)).unwrap();
        v["results"].as_array().unwrap().iter().map(|r| r["path"].as_str().unwrap().to_string()).collect()
    };
    for config in [
        // 2026.9: agents.entries.<id>.memory.search; no extraPaths in the defaults.
        r#"{"memory":{"search":{"provider":"none"}},"agents":{"entries":{"work":{"memory":{"search":{"extraPaths":["notes"]}}}}}}"#,
        // 2026.7: agents.list[].memorySearch.
        r#"{"memory":{"search":{"provider":"none"}},"agents":{"list":[{"id":"work","memorySearch":{"extraPaths":["notes"]}}]}}"#,
    ] {
        assert_eq!(paths(config, "work", "wombat"), vec!["notes/wombat.md"], "{config}");
        assert!(paths(config, "main", "wombat").is_empty(), "{config}");
    }
    // Defaults with extraPaths and an agent without: the defaults' stay; with both: both count.
    let both = r#"{"memory":{"search":{"provider":"none","extraPaths":["more"]}},"agents":{"entries":{"work":{"memory":{"search":{"extraPaths":["notes"]}}},"solo":{"memory":{"search":{"maxResults":3}}}}}}"#;
    assert_eq!(paths(both, "work", "wombat"), vec!["notes/wombat.md"]);
    assert_eq!(paths(both, "work", "koala"), vec!["more/koala.md"]);
    assert_eq!(paths(both, "solo", "koala"), vec!["more/koala.md"]);
}

/// Run `cmd`, killing it after `limit`: `None` when it did not end in time.
fn run_within(mut cmd: Command, limit: Duration) -> Option<Output> {
    let mut child = cmd.stdout(std::process::Stdio::piped()).stderr(std::process::Stdio::piped()).spawn().unwrap();
    let deadline = Instant::now() + limit;
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Some(child.wait_with_output().unwrap())
}

fn today() -> String {
    chrono::Local::now().format("%Y-%m-%d").to_string()
}

#[test]
fn commands_wait_a_bounded_time_for_another_process_holding_the_index_and_append_never_depends_on_it() {
    let env = Env::new();
    let cfg = env.config(PLAIN);
    let o = env.cmd(Some(&cfg)).arg("index").output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let lock = walk(env.state.path()).into_iter().find(|p| p.extension().is_some_and(|e| e == "lock")).expect("the index's lock file");
    // Another process (this test) holds the index's writer lock, as a long `index --force` does.
    let held = fs::File::open(&lock).unwrap();
    held.lock().unwrap();

    let started = Instant::now();
    let mut cmd = env.cmd(Some(&cfg));
    cmd.args(["append", "The quokka ledger closes on Fridays"]);
    let o = run_within(cmd, Duration::from_secs(30)).expect("append waited without limit for the index lock");
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(started.elapsed() < Duration::from_secs(20), "{:?}", started.elapsed());
    assert!(stdout(&o).contains("not indexed yet"), "{}", stdout(&o));
    let e = stderr(&o);
    assert!(e.contains("waiting up to 5 s for another process"), "says what it waits for: {e}");
    assert!(e.contains("the entry is written") && e.contains("the next search indexes it"), "{e}");
    let log = fs::read_to_string(env.ws.path().join(format!("memory/{}.md", today()))).unwrap();
    assert_eq!(log.matches("quokka ledger").count(), 1, "{log}");

    for args in [&["index"][..], &["reset", "--yes"][..]] {
        let mut cmd = env.cmd(Some(&cfg));
        cmd.args(args);
        let o = run_within(cmd, Duration::from_secs(30)).unwrap_or_else(|| panic!("{args:?} waited without limit for the index lock"));
        assert_eq!(o.status.code(), Some(1), "{args:?}: {}", stderr(&o));
        assert!(stderr(&o).contains("another process is updating the index"), "{args:?}: {}", stderr(&o));
    }
    drop(held);
    // The next search indexes the entry.
    let o = env.cmd(Some(&cfg)).args(["search", "quokka ledger", "--json"]).output().unwrap();
    let v: Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["results"][0]["path"], format!("memory/{}.md", today()), "{v}");
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

#[test]
fn a_lone_carriage_return_in_appended_text_starts_no_line_of_its_own() {
    let env = Env::new();
    let cfg = env.config(PLAIN);
    let o = env.cmd(Some(&cfg)).args(["append", "x\r# 1999-01-01 HEADING\r- planted item\r\nlast"]).output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let log = fs::read_to_string(env.ws.path().join(format!("memory/{}.md", today()))).unwrap();
    assert!(!log.contains('\r'), "{log:?}");
    let entry: Vec<&str> = log.lines().skip_while(|l| !l.starts_with("- [")).collect();
    assert_eq!(entry.len(), 4, "{log:?}");
    assert!(entry[1..].iter().all(|l| l.starts_with("  ")), "continuation lines are indented: {log:?}");
}

#[test]
fn small_faults_exit_quietly_or_clearly() {
    let env = Env::new();
    let cfg = env.config(PLAIN);
    // A reader that goes away (`| head -1`): no "Broken pipe" error, exit 0 as grep's quiet end.
    let mut child =
        env.cmd(Some(&cfg)).args(["search", "gateway"]).stdout(std::process::Stdio::piped()).stderr(std::process::Stdio::piped()).spawn().unwrap();
    drop(child.stdout.take());
    let o = child.wait_with_output().unwrap();
    assert!(o.status.success(), "{:?}: {}", o.status, stderr(&o));
    assert!(!stderr(&o).to_lowercase().contains("broken pipe"), "{}", stderr(&o));

    // `append - </dev/zero`: bounded by the entry cap, at once, and nothing written.
    let started = Instant::now();
    let mut cmd = env.cmd(Some(&cfg));
    cmd.args(["append", "-"]).stdin(fs::File::open("/dev/zero").unwrap());
    let o = run_within(cmd, Duration::from_secs(20)).expect("append - </dev/zero read without limit");
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("one entry holds at most 16384 bytes"), "{}", stderr(&o));
    assert!(started.elapsed() < Duration::from_secs(10));
    assert!(!env.ws.path().join(format!("memory/{}.md", today())).exists());

    // `--lines 0` reads no line.
    let o = env.cmd(Some(&cfg)).args(["get", "MEMORY.md", "--lines", "0", "--json"]).output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let v: Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!((v["text"].as_str(), v["lines"].as_u64()), (Some(""), Some(0)), "{v}");

    // An empty MEMORY_WORKSPACE is unset: the current folder is the workspace, as without the variable.
    let o = common::isolated(Command::new(env!("CARGO_BIN_EXE_memory")), env.state.path())
        .args(["--state-dir"])
        .arg(env.state.path())
        .arg("--config")
        .arg(&cfg)
        .args(["search", "gateway", "--json"])
        .current_dir(env.ws.path())
        .env("MEMORY_WORKSPACE", "")
        .env("MEMORY_AGENT", "")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let v: Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["results"][0]["path"], "MEMORY.md");
}

// Unix only: making a symbolic link needs a privilege on Windows.
#[cfg(unix)]
#[test]
fn status_says_each_symlink_warning_once() {
    let env = Env::new();
    let cfg = env.config(PLAIN);
    let outside = tempfile::tempdir().unwrap();
    fs::write(outside.path().join("secret.md"), "# Secret\n").unwrap();
    std::os::unix::fs::symlink(outside.path().join("secret.md"), env.ws.path().join("memory/link.md")).unwrap();
    // `--deep` runs a real search besides the status: discovery walks the files more than once.
    let o = env.cmd(Some(&cfg)).args(["status", "--deep"]).output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(stderr(&o).matches("symbolic link skipped").count(), 1, "{}", stderr(&o));
}

#[test]
fn append_refuses_a_daily_log_with_another_name() {
    let env = Env::new();
    let cfg = env.config(PLAIN);
    // A hard link placed in memory/ makes today's log another file, outside the workspace.
    let outside = tempfile::tempdir_in(env.ws.path().parent().unwrap()).unwrap();
    let target = outside.path().join("elsewhere.md");
    fs::write(&target, "# Elsewhere\n").unwrap();
    let log = env.ws.path().join(format!("memory/{}.md", today()));
    fs::hard_link(&target, &log).unwrap();
    let o = env.cmd(Some(&cfg)).args(["append", "should not land elsewhere"]).output().unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("hard links"), "{}", stderr(&o));
    assert_eq!(fs::read_to_string(&target).unwrap(), "# Elsewhere\n");
}
