//! The `memory` command as a user runs it: exit codes, one-line errors, JSON field names.

use std::fs;
use std::path::Path;
use std::process::{Command, Output};

use conformance::testing::TestDirs;

mod common;

struct Env {
    ws: tempfile::TempDir,
    state: tempfile::TempDir,
}

impl Env {
    fn new() -> Env {
        let TestDirs { ws, state } = common::workspace(&[
            ("memory/2026-11-29.md", "# 2026-11-29\n\n- Fixed error E4012 in billing\n- Lunch with Alice\n"),
            ("memory/notes.md", "# Notes\n\nKubernetes canary rollout checklist\n"),
        ]);
        Env { ws, state }
    }

    fn run(&self, args: &[&str]) -> Output {
        common::memory(self.ws.path(), self.state.path(), None).args(args).output().unwrap()
    }
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// `--version` names the commit built (from a checkout) and the build date, so a report says exactly which build
/// it came from.
#[test]
fn version_names_the_commit_it_was_built_from() {
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_memory")).arg("--version").output().unwrap();
    assert!(o.status.success());
    let text = stdout(&o);
    assert!(text.starts_with(&format!("memory {}", env!("CARGO_PKG_VERSION"))), "{text}");
    let built = text.split("built ").nth(1).map(|d| d.trim_end().trim_end_matches(')')).unwrap_or_else(|| panic!("no build date: {text}"));
    let parts: Vec<&str> = built.split('-').collect();
    assert!(parts.len() == 3 && parts.iter().all(|p| p.parse::<u32>().is_ok()) && parts[0].len() == 4, "{text}");
    let head = std::process::Command::new("git").args(["rev-parse", "--short=10", "HEAD"]).current_dir(env!("CARGO_MANIFEST_DIR")).output();
    match head {
        Ok(h) if h.status.success() => {
            let commit = String::from_utf8_lossy(&h.stdout).trim().to_string();
            assert!(text.contains(&format!("(commit {commit}, ")), "{text} does not name {commit}");
        }
        _ => eprintln!("SKIP: no git checkout here; --version says {text}"),
    }
}

/// The subcommands `memory --help` lists (the lines of its `Commands:` section), or those of `memory <sub> --help`.
fn listed_subcommands(args: &[&str]) -> Vec<String> {
    let o = Command::new(env!("CARGO_BIN_EXE_memory")).args(args).arg("--help").output().unwrap();
    let help = stdout(&o);
    let section = help.split("Commands:\n").nth(1).unwrap_or_else(|| panic!("no Commands: section in {help}"));
    section
        .lines()
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|name| *name != "help")
        .map(str::to_string)
        .collect()
}

/// `memory man` is memory(1) as roff, and names every subcommand the help lists; `--out-dir` writes a page for
/// each of them (and for nested ones: memory-server-start.1), each a page `man` renders without a warning.
#[test]
fn man_pages_name_every_subcommand() {
    let o = Command::new(env!("CARGO_BIN_EXE_memory")).arg("man").output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let page = stdout(&o);
    assert!(page.contains(".TH memory 1"), "{page}");
    let subs = listed_subcommands(&[]);
    assert!(subs.len() >= 10 && subs.iter().any(|s| s == "search"), "{subs:?}");
    let listed = page.split(".SH SUBCOMMANDS").nth(1).unwrap_or_else(|| panic!("no SUBCOMMANDS section: {page}"));
    for sub in &subs {
        assert!(listed.contains(&format!("memory\\-{sub}(1)")), "memory(1) does not list {sub}");
    }
    assert!(!page.contains("embed\\-pending"), "a hidden subcommand is in the page");

    let dir = tempfile::tempdir().unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_memory")).args(["man", "--out-dir"]).arg(dir.path()).output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let mut expected = vec!["memory.1".to_string()];
    expected.extend(subs.iter().map(|s| format!("memory-{s}.1")));
    expected.extend(listed_subcommands(&["server"]).iter().map(|s| format!("memory-server-{s}.1")));
    for file in &expected {
        let text = fs::read_to_string(dir.path().join(file)).unwrap_or_else(|e| panic!("{file}: {e}"));
        assert!(text.contains(".SH NAME") && text.contains(".SH SYNOPSIS"), "{file}: {text}");
    }
    let search = fs::read_to_string(dir.path().join("memory-search.1")).unwrap();
    assert!(search.contains("max\\-results") && search.contains("memory search"), "{search}");
    assert_eq!(fs::read_dir(dir.path()).unwrap().count(), expected.len() + listed_subcommands(&["openclaw"]).len());
}

#[test]
fn search_indexes_a_new_workspace_and_prints_json_with_wire_names() {
    let env = Env::new();
    let o = env.run(&["search", "which error did I fix in billing?", "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    let first = &v["results"][0];
    assert_eq!(first["path"], "memory/2026-11-29.md");
    assert_eq!(first["startLine"], 1);
    assert_eq!(first["endLine"], 4);
    assert_eq!(first["source"], "memory");
    assert!(first["score"].as_f64().unwrap() > 0.0);
    assert!(first["snippet"].as_str().unwrap().contains("E4012"));
    // The index lives in the state folder, never beside the notes.
    let names: Vec<String> = fs::read_dir(env.ws.path()).unwrap().flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect();
    assert!(names.iter().all(|n| !n.contains("sqlite")), "{names:?}");
}

#[test]
fn text_output_and_max_results() {
    let env = Env::new();
    let o = env.run(&["search", "gateway canary billing", "--max-results", "2"]);
    assert!(o.status.success());
    let out = stdout(&o);
    assert!(out.contains("1. "), "{out}");
    assert!(!out.contains("3. "), "{out}");
    let o = env.run(&["search", "zzzqqq"]);
    assert!(o.status.success());
    assert!(stdout(&o).contains("No results."));
}

#[test]
fn get_reads_lines_and_refuses_with_one_line() {
    let env = Env::new();
    let o = env.run(&["get", "MEMORY.md", "--from", "3", "--lines", "1"]);
    assert!(o.status.success());
    assert_eq!(stdout(&o), "The gateway runs on the Mac Studio.\n");
    for bad in ["../etc/passwd", "/etc/passwd", "memory/../../x.md"] {
        let o = env.run(&["get", bad]);
        assert!(!o.status.success(), "{bad}");
        let err = stderr(&o);
        assert_eq!(err.trim().lines().count(), 1, "{err}");
        assert!(err.starts_with("error: refused"), "{err}");
    }
    let o = env.run(&["get", "memory/2031-01-01.md", "--json"]);
    assert!(o.status.success());
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["text"], "");
    assert_eq!(v["missing"], true);
}

#[test]
fn index_status_reset() {
    let env = Env::new();
    let o = env.run(&["index", "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["filesAdded"], 3);
    let o = env.run(&["status", "--json"]);
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["backend"], "builtin");
    assert_eq!(v["files"], 3);
    assert_eq!(v["dirty"], false);
    assert_eq!(v["capabilities"]["keyword"], true);
    let index = v["indexPath"].as_str().unwrap().to_string();
    assert!(Path::new(&index).exists());

    let o = env.run(&["reset"]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("--yes"));
    assert!(Path::new(&index).exists());
    let o = env.run(&["reset", "--yes"]);
    assert!(o.status.success());
    assert!(env.ws.path().join("MEMORY.md").exists());
    let o = env.run(&["status", "--json"]);
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["files"], 0);
    assert_eq!(v["extra"]["indexed"], false, "{v}");
}

#[test]
fn malformed_config_names_the_key() {
    let env = Env::new();
    let cfg = env.state.path().join("config.json5");
    fs::write(&cfg, "{ memory: { search: { query: { maxResults: 'many' } } } }").unwrap();
    let o = env.run(&["--config", cfg.to_str().unwrap(), "search", "gateway"]);
    assert!(!o.status.success());
    let err = stderr(&o);
    assert!(err.contains("memory.search.query.maxResults"), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    fs::write(&cfg, "{ memory: { backend: 'nope' } }").unwrap();
    let o = env.run(&["--config", cfg.to_str().unwrap(), "status"]);
    assert!(stderr(&o).contains("memory.backend"), "{}", stderr(&o));
}

#[test]
fn missing_workspace_is_a_clear_error() {
    let env = Env::new();
    let o = Command::new(env!("CARGO_BIN_EXE_memory"))
        .args(["--workspace", "/definitely/not/here", "--state-dir"])
        .arg(env.state.path())
        .args(["search", "x"])
        .output()
        .unwrap();
    assert!(!o.status.success());
    assert!(stderr(&o).contains("not a folder"));
}

/// An index an earlier version wrote under its old name (`<workspace folder>-<10 hex>.sqlite` and its generation
/// files) keeps answering: no second index is built beside it, nothing is indexed again.
#[test]
fn an_index_under_an_earlier_versions_name_keeps_answering() {
    let env = Env::new();
    assert!(env.run(&["index"]).status.success());
    let agent_dir = env.state.path().join("agents/main");
    let names = || -> Vec<String> { fs::read_dir(&agent_dir).unwrap().flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect() };
    let base = names().into_iter().find(|n| n.starts_with("builtin-") && n.ends_with(".sqlite")).expect("the index under its name");
    // Rename the index and every companion (pointer, generations, WAL) to the earlier name.
    let ws = memory_core::paths::canonical(env.ws.path()).unwrap();
    let ws_name: String =
        ws.file_name().unwrap().to_string_lossy().chars().map(|c| if c.is_alphanumeric() || c == '-' || c == '_' { c } else { '_' }).collect();
    let old = format!("{ws_name}-{}.sqlite", &memory_core::sha256_hex(ws.to_string_lossy().as_bytes())[..10]);
    for n in names().into_iter().filter(|n| n.starts_with(&base)) {
        fs::rename(agent_dir.join(&n), agent_dir.join(n.replacen(&base, &old, 1))).unwrap();
    }
    let status: serde_json::Value = serde_json::from_slice(&env.run(&["status", "--json"]).stdout).unwrap();
    assert!(status["indexPath"].as_str().unwrap().contains(&old), "{status}");
    assert_eq!(status["files"], 3, "{status}");
    let out = env.run(&["search", "canary rollout", "--json"]);
    assert!(stdout(&out).contains("memory/notes.md"), "{}", stderr(&out));
    let index: serde_json::Value = serde_json::from_slice(&env.run(&["index", "--json"]).stdout).unwrap();
    assert_eq!((index["filesAdded"].as_u64(), index["filesUnchanged"].as_u64()), (Some(0), Some(3)), "{index}");
    assert!(!names().iter().any(|n| n.starts_with("builtin-")), "{:?}", names());
}
