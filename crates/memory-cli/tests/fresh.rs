//! Search sees what was just written (issue 18), driven as an agent does: the built binary one shot at a time,
//! and `memory serve` through a real MCP client, with no explicit `index` and no sleep between write and search.

use std::fs;
use std::io::Write;
use std::process::{Command, Output};
use std::time::Duration;

use conformance::testing::TestDirs;
use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::service::{RoleClient, RunningService};
use rmcp::transport::{ConfigureCommandExt, TokioChildProcess};
use rmcp::ServiceExt;
use serde_json::{json, Value};

mod common;

const LIMIT: Duration = Duration::from_secs(30);

struct Env {
    ws: tempfile::TempDir,
    state: tempfile::TempDir,
    config: Option<std::path::PathBuf>,
}

impl Env {
    fn new() -> Env {
        let TestDirs { ws, state } = common::workspace(&[
            ("memory/2026-11-30.md", "# 2026-11-30\n\n- Lunch with Alice\n"),
            ("memory/garden.md", "# Garden\n\nThe tomatoes need watering on Sundays.\n"),
        ]);
        Env { ws, state, config: None }
    }

    fn with_config(mut self, json5: &str) -> Env {
        let p = self.state.path().join("config.json5");
        fs::write(&p, json5).unwrap();
        self.config = Some(p);
        self
    }

    fn command(&self) -> Command {
        common::memory(self.ws.path(), self.state.path(), self.config.as_deref())
    }

    fn run(&self, args: &[&str]) -> Output {
        let o = self.command().args(args).output().unwrap();
        assert!(o.status.success(), "memory {args:?} failed: {}", String::from_utf8_lossy(&o.stderr));
        o
    }

    fn search(&self, query: &str) -> Value {
        serde_json::from_slice(&self.run(&["search", query, "--json"]).stdout).unwrap()
    }

    fn append(&self, rel: &str, text: &str) {
        fs::OpenOptions::new().append(true).create(true).open(self.ws.path().join(rel)).unwrap().write_all(text.as_bytes()).unwrap();
    }
}

fn paths(v: &Value) -> Vec<String> {
    v["results"].as_array().unwrap().iter().map(|r| r["path"].as_str().unwrap().to_string()).collect()
}

fn snippets(v: &Value) -> String {
    v["results"].as_array().unwrap().iter().map(|r| r["snippet"].as_str().unwrap()).collect::<Vec<_>>().join("\n")
}

#[test]
fn one_shot_searches_see_appends_rewrites_deletes_and_renames_at_once() {
    let env = Env::new();
    env.run(&["index"]);

    env.append("memory/2026-11-30.md", "- The cat is named Miso.\n");
    assert_eq!(paths(&env.search("Miso")), ["memory/2026-11-30.md"]);

    fs::remove_file(env.ws.path().join("memory/garden.md")).unwrap();
    let v = env.search("tomatoes watering");
    assert!(!paths(&v).contains(&"memory/garden.md".to_string()), "{v}");

    // A rewrite of the same length, right after the previous sync: same size, and often the same mtime tick.
    fs::write(env.ws.path().join("MEMORY.md"), "# Memory\n\nThe gateway runs on the Mac Pro!!.\n").unwrap();
    env.search("gateway");
    fs::write(env.ws.path().join("MEMORY.md"), "# Memory\n\nThe gateway runs on the NUC box..\n").unwrap();
    let v = env.search("gateway");
    assert!(snippets(&v).contains("NUC box"), "{v}");
    assert!(!snippets(&v).contains("Mac Pro"), "the old text of a rewritten file was returned: {v}");

    fs::rename(env.ws.path().join("memory/2026-11-30.md"), env.ws.path().join("memory/2026-12-01.md")).unwrap();
    assert_eq!(paths(&env.search("Miso")), ["memory/2026-12-01.md"]);

    // A new folder and a new note in it.
    fs::create_dir_all(env.ws.path().join("memory/projects/kite")).unwrap();
    fs::write(env.ws.path().join("memory/projects/kite/plan.md"), "Kite-powered weather balloon.\n").unwrap();
    assert_eq!(paths(&env.search("weather balloon")), ["memory/projects/kite/plan.md"]);

    let st: Value = serde_json::from_slice(&env.run(&["status", "--json"]).stdout).unwrap();
    assert_eq!(st["files"], 3, "{st}");
}

#[test]
fn an_extra_path_created_later_is_searched_and_tilde_is_home() {
    let home = tempfile::tempdir().unwrap();
    let env = Env::new().with_config(r#"{ memory: { search: { extraPaths: ["~/notes"] } } }"#);
    let run = |args: &[&str]| {
        let o = env.command().env("HOME", home.path()).args(args).output().unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        o
    };
    run(&["index"]);
    fs::create_dir_all(home.path().join("notes")).unwrap();
    fs::write(home.path().join("notes/recipes.md"), "Grandma's plum dumplings.\n").unwrap();
    let v: Value = serde_json::from_slice(&run(&["search", "plum dumplings", "--json"]).stdout).unwrap();
    let found = paths(&v);
    assert_eq!(found.len(), 1, "{v}");
    assert!(found[0].ends_with("notes/recipes.md"), "{v}");
}

#[test]
fn with_on_search_off_searches_answer_from_the_index_as_it_is_and_status_says_stale() {
    let env = Env::new().with_config("{ memory: { search: { sync: { onSearch: false } } } }");
    env.run(&["index"]);
    env.append("memory/2026-11-30.md", "- The cat is named Miso.\n");
    assert!(paths(&env.search("Miso")).is_empty());
    let st: Value = serde_json::from_slice(&env.run(&["status", "--json"]).stdout).unwrap();
    assert_eq!(st["dirty"], true, "{st}");
    env.run(&["index"]);
    assert_eq!(paths(&env.search("Miso")), ["memory/2026-11-30.md"]);
}

#[test]
fn a_pending_rebuild_is_not_waited_for_the_changed_file_is_found_and_the_answer_says_so() {
    let env = Env::new();
    env.run(&["index"]);
    // New chunking settings: the index must be rebuilt, which a search does not do.
    let env = env.with_config("{ memory: { search: { chunking: { tokens: 200, overlap: 40 } } } }");
    env.append("memory/2026-11-30.md", "- The cat is named Miso.\n");
    let v = env.search("Miso");
    assert_eq!(paths(&v), ["memory/2026-11-30.md"], "{v}");
    let warnings = v["warnings"].to_string();
    assert!(warnings.contains("rebuild"), "{v}");
    let st: Value = serde_json::from_slice(&env.run(&["status", "--json"]).stdout).unwrap();
    assert_eq!(st["rebuildPending"], true, "{st}");
    // The rebuild, when it runs, keeps the fact.
    env.run(&["index"]);
    let v = env.search("Miso");
    assert_eq!(paths(&v), ["memory/2026-11-30.md"]);
    assert!(!v["warnings"].to_string().contains("rebuild"), "{v}");
}

#[test]
fn after_memory_append_the_next_search_finds_it() {
    let env = Env::new();
    env.run(&["append", "Deploys go through the canary first"]);
    let v = env.search("canary");
    assert_eq!(paths(&v).len(), 1, "{v}");
    assert!(paths(&v)[0].starts_with("memory/"), "{v}");
}

/// A `memory serve` session, and its process id.
async fn connect(env: &Env, extra: &[&str]) -> (RunningService<RoleClient, ()>, u32) {
    let mut std_cmd = env.command();
    std_cmd.arg("serve").args(extra);
    let cmd = tokio::process::Command::from(std_cmd);
    let transport = TokioChildProcess::new(cmd.configure(|_| {})).unwrap();
    let pid = transport.id().expect("the server runs");
    (tokio::time::timeout(LIMIT, ().serve(transport)).await.expect("handshake timed out").expect("handshake failed"), pid)
}

/// The inotify instances process `pid` holds.
#[cfg(target_os = "linux")]
fn inotify_instances(pid: u32) -> usize {
    let fds = fs::read_dir(format!("/proc/{pid}/fd")).unwrap();
    fds.flatten().filter(|fd| fs::read_link(fd.path()).is_ok_and(|to| to.as_os_str() == "anon_inode:inotify")).count()
}

async fn search(client: &RunningService<RoleClient, ()>, query: &str) -> Value {
    let params = CallToolRequestParams::new("memory_search").with_arguments(json!({ "query": query }).as_object().unwrap().clone());
    let r: CallToolResult = tokio::time::timeout(LIMIT, client.call_tool(params)).await.expect("tool call timed out").expect("tool call failed");
    assert_ne!(r.is_error, Some(true), "{r:?}");
    let text = r.content.first().and_then(|c| c.as_text()).map(|t| t.text.clone()).expect("text content");
    serde_json::from_str(&text).unwrap()
}

/// Write, search at once, rewrite, delete, search again: in one `memory serve` session, no sleep in between. On
/// Linux the process then watches the files once (one inotify instance), whether its watcher runs or not: the
/// watcher is fed by the engine's change journal, the one its searches' freshness check drains.
async fn agent_loop(env: &Env, extra: &[&str]) {
    let (client, pid) = connect(env, extra).await;
    assert!(paths(&search(&client, "Miso").await).is_empty());
    fs::write(env.ws.path().join("memory/2026-12-01.md"), "# 2026-12-01\n\n- The cat is named Miso.\n").unwrap();
    assert_eq!(paths(&search(&client, "Miso").await), ["memory/2026-12-01.md"]);
    fs::write(env.ws.path().join("memory/2026-12-01.md"), "# 2026-12-01\n\n- The dog is named Rex.\n").unwrap();
    let v = search(&client, "Miso").await;
    assert!(!snippets(&v).contains("Miso"), "{v}");
    assert_eq!(paths(&search(&client, "Rex").await), ["memory/2026-12-01.md"]);
    fs::remove_file(env.ws.path().join("memory/garden.md")).unwrap();
    assert!(!paths(&search(&client, "tomatoes").await).contains(&"memory/garden.md".to_string()));
    #[cfg(target_os = "linux")]
    assert_eq!(inotify_instances(pid), 1, "one set of watches");
    #[cfg(not(target_os = "linux"))]
    let _ = pid;
    client.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_with_the_watcher_sees_writes_at_once() {
    agent_loop(&Env::new(), &[]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_without_the_watcher_sees_writes_at_once() {
    agent_loop(&Env::new(), &["--no-watch"]).await;
}

/// The LanceDB engine (opened on demand behind the builtin fallback) feeds the watcher from its journal too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_on_lancedb_with_the_watcher_sees_writes_at_once() {
    let env = Env::new().with_config(r#"{ memory: { backend: "lancedb" } }"#);
    let o = env.command().args(["status", "--json"]).output().unwrap();
    if !o.status.success() && String::from_utf8_lossy(&o.stderr).contains("built without the lancedb engine") {
        conformance::testing::missing_prerequisite(
            "serve_on_lancedb_with_the_watcher_sees_writes_at_once",
            "this memory binary was built without the lancedb feature",
        );
        return;
    }
    agent_loop(&env, &[]).await;
}
