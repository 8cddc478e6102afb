//! `memory status --deep --json`, `memory append`, `memory completions`, and the OpenClaw fallbacks.

use std::fs;
use std::path::Path;
use std::process::{Command, Output, Stdio};

fn memory(ws: Option<&Path>, state: &Path, args: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_memory"));
    if let Some(ws) = ws {
        c.arg("--workspace").arg(ws);
    }
    c.arg("--state-dir").arg(state).args(args);
    c.env_remove("MEMORY_CONFIG").env_remove("MEMORY_WORKSPACE").env_remove("OPENCLAW_CONFIG_PATH").env_remove("OPENCLAW_WORKSPACE_DIR");
    c.env("OPENCLAW_STATE_DIR", state.join("no-openclaw"));
    c
}

fn json(o: &Output) -> serde_json::Value {
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_slice(&o.stdout).unwrap()
}

#[test]
fn status_json_fields_and_deep_probe() {
    let ws = tempfile::tempdir().unwrap();
    let state = tempfile::tempdir().unwrap();
    fs::write(ws.path().join("MEMORY.md"), "# Memory\n\nThe gateway runs on the Mac Studio.\n").unwrap();
    json(&memory(Some(ws.path()), state.path(), &["index", "--json"]).output().unwrap());
    let v = json(&memory(Some(ws.path()), state.path(), &["status", "--deep", "--json"]).output().unwrap());
    assert_eq!(v["backend"], "builtin");
    assert_eq!(v["files"], 1);
    assert!(v["chunks"].as_u64().unwrap() >= 1);
    assert_eq!(v["workspaceFrom"], "flag");
    assert_eq!(v["configPath"], serde_json::Value::Null);
    assert_eq!(v["rebuildPending"], false);
    assert!(v["indexBytes"].as_u64().unwrap() > 0, "{v}");
    assert_eq!(v["sync"]["watchDebounceMs"], 1500);
    assert_eq!(v["capabilities"]["keyword"], true);
    assert_eq!(v["deep"]["search"]["ok"], true, "{v}");
    assert_eq!(v["deep"]["search"]["results"], 1, "{v}");
    assert!(v["deep"]["search"]["ms"].as_f64().unwrap() >= 0.0);
    assert!(v["deep"]["embeddings"]["ok"].is_boolean(), "{v}");
    assert!(v.get("deep").is_some());
    let v = json(&memory(Some(ws.path()), state.path(), &["status", "--json"]).output().unwrap());
    assert!(v.get("deep").is_none());
}

#[test]
fn append_from_argument_and_stdin_is_searchable() {
    let ws = tempfile::tempdir().unwrap();
    let state = tempfile::tempdir().unwrap();
    let v = json(&memory(Some(ws.path()), state.path(), &["append", "Alice", "prefers", "Tuesday", "meetings", "--json"]).output().unwrap());
    assert_eq!(v["indexed"], true);
    assert_eq!(v["created"], true);
    let path = v["path"].as_str().unwrap().to_string();
    assert!(ws.path().join(&path).is_file());
    let mut child = memory(Some(ws.path()), state.path(), &["append", "-", "--json"]).stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().unwrap();
    std::io::Write::write_all(&mut child.stdin.take().unwrap(), b"The wallaby server moved\nto rack 7\n").unwrap();
    let v = json(&child.wait_with_output().unwrap());
    assert_eq!(v["created"], false);
    assert_eq!(v["endLine"].as_u64().unwrap(), v["startLine"].as_u64().unwrap() + 1);
    let text = fs::read_to_string(ws.path().join(&path)).unwrap();
    assert!(text.contains("Alice prefers Tuesday meetings\n") && text.contains("The wallaby server moved\n  to rack 7\n"), "{text}");
    let r = json(&memory(Some(ws.path()), state.path(), &["search", "wallaby", "--json"]).output().unwrap());
    assert_eq!(r["results"][0]["path"], path.as_str());
    let o = memory(Some(ws.path()), state.path(), &["append", " "]).output().unwrap();
    assert!(!o.status.success());
}

#[test]
fn completions_and_help_examples() {
    let state = tempfile::tempdir().unwrap();
    for shell in ["bash", "zsh", "fish"] {
        let o = memory(None, state.path(), &["completions", shell]).output().unwrap();
        assert!(o.status.success());
        let s = String::from_utf8_lossy(&o.stdout);
        assert!(s.contains("serve") && s.contains("watch"), "{shell}");
    }
    let o = memory(None, state.path(), &["--help"]).output().unwrap();
    assert!(String::from_utf8_lossy(&o.stdout).contains("Examples:"));
}

#[test]
fn openclaw_config_and_workspace_are_the_fallback() {
    let home = tempfile::tempdir().unwrap();
    let state = tempfile::tempdir().unwrap();
    let oc = home.path().join(".openclaw");
    let agent_ws = home.path().join("agent-ws");
    fs::create_dir_all(agent_ws.join("memory")).unwrap();
    fs::create_dir_all(&oc).unwrap();
    fs::write(agent_ws.join("MEMORY.md"), "The koala deploy key lives in the vault.\n").unwrap();
    fs::write(
        oc.join("openclaw.json"),
        format!("{{ gateway: {{ port: 18789 }}, agents: {{ defaults: {{ workspace: '{}' }} }}, memory: {{ search: {{ sync: {{ watchDebounceMs: 700 }} }} }} }}", agent_ws.display()),
    )
    .unwrap();
    let empty_cwd = tempfile::tempdir().unwrap();
    let run = |args: &[&str]| {
        let mut c = memory(None, state.path(), args);
        c.env("HOME", home.path()).env_remove("OPENCLAW_STATE_DIR").current_dir(empty_cwd.path());
        c.output().unwrap()
    };
    let v = json(&run(&["status", "--json"]));
    assert_eq!(v["workspaceFrom"], "openclaw", "{v}");
    assert_eq!(v["sync"]["watchDebounceMs"], 700);
    assert_eq!(v["configPath"], oc.join("openclaw.json").display().to_string());
    let r = json(&run(&["search", "koala", "--json"]));
    assert_eq!(r["results"][0]["path"], "MEMORY.md");
    // A current folder with memory files wins over OpenClaw's workspace.
    fs::write(empty_cwd.path().join("MEMORY.md"), "local\n").unwrap();
    let v = json(&run(&["status", "--json"]));
    assert_eq!(v["workspaceFrom"], "currentFolder");
}
