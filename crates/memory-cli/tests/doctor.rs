//! `memory doctor` through the binary: each check's OK, WARN and FAIL, the exit status and `--json`; and the
//! skipped files `memory status` lists and a search that finds nothing mentions.

mod common;

use std::path::Path;
use std::process::Output;

use serde_json::{json, Value};

fn run(dirs: &conformance::testing::TestDirs, config: Option<&Path>, args: &[&str]) -> Output {
    let mut c = common::memory(dirs.ws.path(), dirs.state.path(), config);
    c.env("MEMORY_NO_SERVER", "1").args(args);
    c.output().unwrap()
}

fn text(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

/// `memory doctor --json [extra]`: its checks and whether it exited 0.
fn doctor(dirs: &conformance::testing::TestDirs, config: Option<&Path>, extra: &[&str]) -> (Vec<Value>, bool) {
    let mut args = vec!["doctor", "--json"];
    args.extend_from_slice(extra);
    let o = run(dirs, config, &args);
    let checks: Vec<Value> = serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&o)));
    (checks, o.status.success())
}

/// The lines of one check.
fn lines<'a>(checks: &'a [Value], name: &str) -> Vec<&'a Value> {
    checks.iter().filter(|c| c["check"] == name).collect()
}

/// The one line of `name` at `level`, whose message holds `holds`.
fn has(checks: &[Value], name: &str, level: &str, holds: &str) -> bool {
    lines(checks, name).iter().any(|c| c["level"] == level && c["message"].as_str().unwrap_or("").contains(holds))
}

fn write_config(dirs: &conformance::testing::TestDirs, v: &Value) -> std::path::PathBuf {
    let p = dirs.state.path().join("config.json5");
    std::fs::write(&p, v.to_string()).unwrap();
    p
}

/// `memory doctor` with the config `v` (written as [`write_config`] does).
fn doctor_with(dirs: &conformance::testing::TestDirs, v: &Value) -> (Vec<Value>, bool) {
    let config = write_config(dirs, v);
    doctor(dirs, Some(&config), &[])
}

const CHECKS: [&str; 10] = ["config", "workspace", "embeddings", "reranker", "engine", "fallback", "index", "skipped", "server", "openclaw"];

#[test]
fn a_healthy_keyword_workspace_is_ok_throughout() {
    let dirs = common::workspace(&[("memory/2026-11-01.md", "# Day\n\n- Alice prefers Tuesday meetings\n")]);
    assert!(run(&dirs, None, &["index"]).status.success());
    let (checks, ok) = doctor(&dirs, None, &[]);
    assert!(ok, "{checks:?}");
    for name in CHECKS {
        let l = lines(&checks, name);
        assert!(!l.is_empty(), "no {name} line: {checks:?}");
        assert!(l.iter().all(|c| c["level"] == "OK" && c["fix"].is_null()), "{name}: {l:?}");
    }
    assert!(has(&checks, "workspace", "OK", "2 memory files"), "{checks:?}");
    assert!(has(&checks, "embeddings", "OK", "keyword search only"), "{checks:?}");
    assert!(has(&checks, "index", "OK", "fresh: 2 files"), "{checks:?}");

    // The same checks as text: one line each, the level first.
    let o = run(&dirs, None, &["doctor"]);
    assert!(o.status.success(), "{}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(out.lines().count(), checks.len(), "{out}");
    assert!(out.lines().any(|l| l.starts_with("OK    config: no config file")), "{out}");
    assert!(out.lines().any(|l| l.starts_with("OK    index: fresh")), "{out}");
}

#[test]
fn a_config_key_accepted_but_unused_warns_naming_it() {
    let dirs = common::workspace(&[]);
    let (checks, ok) = doctor_with(&dirs, &json!({ "agents": { "defaults": { "memorySearch": { "local": { "contextSize": 4096 } } } } }));
    assert!(ok, "a warning is no failure: {checks:?}");
    assert!(has(&checks, "config", "OK", "loads"), "{checks:?}");
    let w = lines(&checks, "config").into_iter().find(|c| c["level"] == "WARN").unwrap_or_else(|| panic!("{checks:?}"));
    assert!(w["message"].as_str().unwrap().contains("memorySearch.local.contextSize"), "{w}");
    assert!(w["fix"].as_str().unwrap().contains("contextSize"), "{w}");
}

#[test]
fn a_broken_config_fails_naming_the_key_and_the_rest_still_reports() {
    let dirs = common::workspace(&[]);
    for (config, names) in [
        (json!({ "memory": { "search": { "maxResultz": 5 } } }), "memory.search.maxResultz"),
        (json!({ "memory": { "search": { "maxResults": "many" } } }), "maxResults"),
    ] {
        let (checks, ok) = doctor_with(&dirs, &config);
        assert!(!ok, "exit status 0 on a FAIL: {checks:?}");
        assert!(has(&checks, "config", "FAIL", names), "{checks:?}");
        for name in CHECKS {
            assert!(!lines(&checks, name).is_empty(), "no {name} line: {checks:?}");
        }
        assert!(has(&checks, "engine", "WARN", "not checked (the config does not load)"), "{checks:?}");
        assert!(has(&checks, "server", "OK", "not running"), "{checks:?}");
    }
    // Not JSON5 at all.
    let config = dirs.state.path().join("config.json5");
    std::fs::write(&config, "{ memory: ").unwrap();
    let (checks, ok) = doctor(&dirs, Some(&config), &[]);
    assert!(!ok && has(&checks, "config", "FAIL", "config.json5"), "{checks:?}");
    // A config file that is not there.
    let (checks, ok) = doctor(&dirs, Some(&dirs.state.path().join("missing.json5")), &[]);
    assert!(!ok && has(&checks, "config", "FAIL", "missing.json5"), "{checks:?}");
}

#[test]
fn a_missing_workspace_fails_and_an_empty_one_warns() {
    let dirs = common::workspace(&[]);
    let mut c = common::memory(&dirs.ws.path().join("nowhere"), dirs.state.path(), None);
    let o = c.args(["doctor", "--json"]).output().unwrap();
    assert!(!o.status.success());
    let checks: Vec<Value> = serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&o)));
    assert!(has(&checks, "workspace", "FAIL", "is not a folder"), "{checks:?}");
    assert!(has(&checks, "index", "WARN", "not checked (no workspace)"), "{checks:?}");
    // What needs the config only is checked all the same.
    assert!(has(&checks, "embeddings", "OK", "keyword search only"), "{checks:?}");

    std::fs::remove_file(dirs.ws.path().join("MEMORY.md")).unwrap();
    let (checks, ok) = doctor(&dirs, None, &[]);
    assert!(ok, "{checks:?}");
    assert!(has(&checks, "workspace", "WARN", "holds no memory files"), "{checks:?}");
}

#[test]
fn the_embedding_check_embeds_once_and_reports_the_width() {
    let base_url = common::slow_embedding_server(std::time::Duration::ZERO);
    let dirs = common::workspace(&[]);
    let (checks, ok) =
        doctor_with(&dirs, &json!({ "memory": { "search": { "provider": "openai-compatible", "model": "m", "remote": { "baseUrl": base_url } } } }));
    assert!(ok, "{checks:?}");
    assert!(has(&checks, "embeddings", "OK", "64 dimensions"), "{checks:?}");
    assert!(has(&checks, "engine", "OK", "hybrid search"), "{checks:?}");
}

#[test]
fn an_embedding_model_that_cannot_load_fails() {
    let dirs = common::workspace(&[]);
    let missing = dirs.state.path().join("no-such-model");
    let (checks, ok) = doctor_with(&dirs, &json!({ "memory": { "search": { "provider": "local", "local": { "modelPath": missing } } } }));
    assert!(!ok, "{checks:?}");
    let e = lines(&checks, "embeddings");
    assert!(e.len() == 1 && e[0]["level"] == "FAIL" && e[0]["message"].as_str().unwrap().contains("no-such-model"), "{checks:?}");
    assert!(e[0]["fix"].is_string(), "{checks:?}");
    // The rest is still checked: the index answers by its words meanwhile.
    assert!(has(&checks, "engine", "OK", "builtin"), "{checks:?}");
}

/// The local model loads and embeds (its width), and the reranker loads and scores a pair.
#[test]
fn a_local_model_and_reranker_load_and_answer() {
    let test = "a_local_model_and_reranker_load_and_answer";
    let var = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
    let (Some(model), Some(reranker)) = (var("MEMORY_TEST_MODEL"), var("MEMORY_TEST_RERANKER_MODEL")) else {
        conformance::testing::missing_prerequisite(test, "MEMORY_TEST_MODEL or MEMORY_TEST_RERANKER_MODEL is not set (scripts/setup.sh --env)");
        return;
    };
    let dirs = common::workspace(&[]);
    let (checks, ok) = doctor_with(
        &dirs,
        &json!({ "memory": { "search": { "provider": "local", "local": { "modelPath": model }, "query": { "rerank": { "enabled": true, "modelPath": reranker } } } } }),
    );
    assert!(ok, "{checks:?}");
    assert!(has(&checks, "embeddings", "OK", "384 dimensions"), "{checks:?}");
    assert!(has(&checks, "reranker", "OK", "one pair scored"), "{checks:?}");
}

#[test]
fn an_embedding_provider_that_does_not_answer_fails() {
    let dirs = common::workspace(&[]);
    // A port nobody listens on.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let (checks, ok) = doctor_with(
        &dirs,
        &json!({ "memory": { "search": { "provider": "openai-compatible", "model": "m", "remote": { "baseUrl": format!("http://127.0.0.1:{port}/v1") } } } }),
    );
    assert!(!ok, "{checks:?}");
    assert!(has(&checks, "embeddings", "FAIL", "openai-compatible"), "{checks:?}");
}

#[test]
fn a_reranker_that_cannot_load_fails() {
    let dirs = common::workspace(&[]);
    let missing = dirs.state.path().join("no-such-reranker");
    let (checks, ok) = doctor_with(&dirs, &json!({ "memory": { "search": { "query": { "rerank": { "enabled": true, "modelPath": missing } } } } }));
    assert!(!ok, "{checks:?}");
    assert!(has(&checks, "reranker", "FAIL", "cannot be used"), "{checks:?}");
    let (checks, _) = doctor(&dirs, None, &[]);
    assert!(has(&checks, "reranker", "OK", "off"), "{checks:?}");
}

#[test]
fn an_engine_that_cannot_open_fails() {
    let dirs = common::workspace(&[]);
    // The state folder is a file: no index can be made there.
    let state_file = dirs.state.path().join("state-is-a-file");
    std::fs::write(&state_file, "x").unwrap();
    let mut c = common::memory(dirs.ws.path(), &state_file, None);
    let o = c.args(["doctor", "--json"]).output().unwrap();
    let checks: Vec<Value> = serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&o)));
    assert!(!o.status.success(), "{checks:?}");
    assert!(has(&checks, "engine", "FAIL", "builtin"), "{checks:?}");
    assert!(has(&checks, "index", "WARN", "not checked"), "{checks:?}");
}

// Unix only: the stand-in qmd is a shell script.
#[cfg(unix)]
#[test]
fn an_engine_that_fails_is_said_and_the_fallback_that_answers_too() {
    let dirs = common::workspace(&[]);
    let qmd = dirs.state.path().join("qmd");
    std::fs::write(&qmd, "#!/bin/sh\necho 'qmd: broken' >&2\nexit 3\n").unwrap();
    std::fs::set_permissions(&qmd, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let config = write_config(
        &dirs,
        &json!({ "memory": { "backend": "qmd", "qmd": { "command": qmd, "update": { "waitForBootSync": true, "commandTimeoutMs": 1000, "updateTimeoutMs": 1000 } } } }),
    );
    let o = run(&dirs, Some(&config), &["doctor"]);
    assert!(!o.status.success(), "{}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.lines().any(|l| l.starts_with("FAIL  engine: qmd is unavailable") && l.contains("qmd: broken") && l.contains("fix: correct memory.qmd")),
        "{out}"
    );
    assert!(out.lines().any(|l| l.starts_with("WARN  fallback: builtin answers instead")), "{out}");
    // Said once, on the engine's line; and no log lines beside the report.
    assert!(!out.lines().any(|l| l.starts_with("WARN  index:") && l.contains("qmd: broken")), "{out}");
    assert!(o.stderr.is_empty(), "{}", String::from_utf8_lossy(&o.stderr));
}

#[test]
fn the_index_check_says_never_built_changed_and_fresh() {
    let dirs = common::workspace(&[]);
    let (checks, ok) = doctor(&dirs, None, &[]);
    assert!(ok, "{checks:?}");
    let i = lines(&checks, "index");
    assert!(i[0]["level"] == "WARN" && i[0]["message"].as_str().unwrap().contains("never built"), "{checks:?}");
    assert!(i[0]["fix"].as_str().unwrap().contains("memory index"), "{checks:?}");

    assert!(run(&dirs, None, &["index"]).status.success());
    let (checks, _) = doctor(&dirs, None, &["--deep"]);
    assert!(has(&checks, "index", "OK", "fresh: 1 files"), "{checks:?}");
    assert!(has(&checks, "index", "OK", "read whole, no damage"), "{checks:?}");

    std::fs::write(dirs.ws.path().join("MEMORY.md"), "# Memory\n\nThe gateway moved to the Mac mini, a longer line.\n").unwrap();
    let (checks, _) = doctor(&dirs, None, &[]);
    assert!(has(&checks, "index", "WARN", "1 files changed since the last sync"), "{checks:?}");
    // The doctor never syncs: still changed.
    let (checks, _) = doctor(&dirs, None, &[]);
    assert!(has(&checks, "index", "WARN", "changed since the last sync"), "{checks:?}");
}

/// `--deep` reads the whole index: damage no search has met is found, said and repaired.
#[test]
fn the_deep_index_check_finds_and_repairs_damage() {
    let dirs = common::workspace(&[]);
    assert!(run(&dirs, None, &["index"]).status.success());
    let o = run(&dirs, None, &["status", "--json"]);
    let v: Value = serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&o)));
    let db = std::path::PathBuf::from(v["indexPath"].as_str().unwrap());
    let mut bytes = std::fs::read(&db).unwrap();
    let needle = b"runs on the Mac";
    let at = bytes.windows(needle.len()).position(|w| w == needle).expect("chunk text in the index file");
    bytes[at..at + needle.len()].fill(0xff);
    std::fs::write(&db, &bytes).unwrap();

    let (checks, ok) = doctor(&dirs, None, &["--deep"]);
    assert!(ok, "a repaired index is no failure: {checks:?}");
    assert!(has(&checks, "index", "WARN", "damaged"), "{checks:?}");
    let (checks, _) = doctor(&dirs, None, &["--deep"]);
    assert!(has(&checks, "index", "OK", "no damage"), "{checks:?}");
}

#[test]
fn skipped_files_warn_with_their_reason() {
    let dirs = common::workspace(&[]);
    std::fs::write(dirs.ws.path().join("memory/blob.md"), b"binary\0data").unwrap();
    assert!(run(&dirs, None, &["index"]).status.success());
    let (checks, ok) = doctor(&dirs, None, &[]);
    assert!(ok, "{checks:?}");
    let s = lines(&checks, "skipped");
    assert!(s.len() == 1 && s[0]["level"] == "WARN", "{checks:?}");
    assert!(s[0]["message"].as_str().unwrap().contains("memory/blob.md (file looks binary"), "{checks:?}");
    assert!(s[0]["fix"].as_str().unwrap().contains("UTF-8"), "{checks:?}");
}

// Unix only: the shared server (and its socket) is Unix's.
#[cfg(unix)]
#[test]
fn the_server_check_finds_a_socket_nobody_answers() {
    let dirs = common::workspace(&[]);
    let (checks, _) = doctor(&dirs, None, &[]);
    assert!(has(&checks, "server", "OK", "not running"), "{checks:?}");
    // What a killed server leaves: its socket file.
    let socket = dirs.state.path().join("server.sock");
    drop(std::os::unix::net::UnixListener::bind(&socket).unwrap());
    let (checks, ok) = doctor(&dirs, None, &[]);
    assert!(ok, "{checks:?}");
    assert!(has(&checks, "server", "WARN", "no server answers"), "{checks:?}");
}

// Unix only: the shared server is Unix's.
#[cfg(unix)]
#[test]
fn the_server_check_finds_a_running_server() {
    let dirs = common::workspace(&[]);
    let o = run(&dirs, None, &["server", "start", "--idle-timeout", "60"]);
    assert!(o.status.success(), "{}", text(&o));
    let (checks, ok) = doctor(&dirs, None, &[]);
    let _ = run(&dirs, None, &["server", "stop"]);
    assert!(ok, "{checks:?}");
    assert!(has(&checks, "server", "OK", "running (pid"), "{checks:?}");
    assert!(has(&checks, "server", "OK", "this build"), "{checks:?}");
}

#[test]
fn the_openclaw_check_says_whether_the_plugin_serves_the_slot() {
    let dirs = common::workspace(&[]);
    let openclaw = dirs.state.path().join("openclaw");
    std::fs::create_dir_all(&openclaw).unwrap();
    let doctor_with = |cfg: &Value| -> (Vec<Value>, bool) {
        std::fs::write(openclaw.join("openclaw.json"), cfg.to_string()).unwrap();
        let mut c = common::memory(dirs.ws.path(), dirs.state.path(), Some(&dirs.state.path().join("none.json5")));
        // The memory config is its own (empty) file: only the OpenClaw check reads OpenClaw's.
        std::fs::write(dirs.state.path().join("none.json5"), "{}").unwrap();
        let o = c.env("OPENCLAW_STATE_DIR", &openclaw).args(["doctor", "--json"]).output().unwrap();
        (serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&o))), o.status.success())
    };
    // OpenClaw without the plugin: a warning with the install command.
    let (checks, ok) = doctor_with(&json!({}));
    assert!(ok, "{checks:?}");
    let l = lines(&checks, "openclaw");
    assert!(l.len() == 1 && l[0]["level"] == "WARN" && l[0]["fix"].as_str().unwrap().contains("memory openclaw install"), "{checks:?}");
    // The slot names the plugin, which is not installed: a failure.
    let (checks, ok) = doctor_with(&json!({ "plugins": { "slots": { "memory": "memory-rs" } } }));
    assert!(!ok, "{checks:?}");
    assert!(has(&checks, "openclaw", "FAIL", "not installed"), "{checks:?}");
    // No OpenClaw at all.
    let (checks, _) = doctor(&dirs, None, &[]);
    assert!(has(&checks, "openclaw", "OK", "OpenClaw not found"), "{checks:?}");
}

/// Item 5: `memory status` lists the files it left out with why, as text and JSON.
#[test]
fn status_lists_skipped_files_with_their_reason() {
    let dirs = common::workspace(&[("memory/notes.md", "# Notes\n\n- Harbour step one\n")]);
    std::fs::write(dirs.ws.path().join("memory/blob.md"), b"binary\0data").unwrap();
    std::fs::write(dirs.ws.path().join("memory/latin1.md"), b"caf\xe9 au lait\n").unwrap();
    std::fs::write(dirs.ws.path().join("memory/big.md"), "word ".repeat(400)).unwrap();
    let config = write_config(&dirs, &json!({ "memory": { "search": { "maxFileBytes": 1000 } } }));
    assert!(run(&dirs, Some(&config), &["index"]).status.success());
    let o = run(&dirs, Some(&config), &["status", "--json"]);
    let v: Value = serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&o)));
    let reason = |path: &str| -> String {
        let f = v["skipped"].as_array().into_iter().flatten().find(|f| f["path"] == path).unwrap_or_else(|| panic!("{path}: {v}"));
        assert_eq!(f["retried"], false, "{f}");
        f["reason"].as_str().unwrap().to_string()
    };
    assert!(reason("memory/blob.md").contains("binary"), "{v}");
    assert!(reason("memory/latin1.md").contains("not valid UTF-8"), "{v}");
    assert!(reason("memory/big.md").contains("over the 1000-byte limit"), "{v}");
    assert_eq!(v["skipped"].as_array().unwrap().len(), 3, "{v}");

    let o = run(&dirs, Some(&config), &["status"]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("Skipped:    memory/blob.md: file looks binary (contains NUL bytes)"), "{out}");
    assert!(out.contains("Skipped:    memory/big.md: file is 2000 bytes, over the 1000-byte limit"), "{out}");
}

/// Item 5: a search that finds nothing says that some notes were left out, and where they are listed.
#[test]
fn a_search_that_finds_nothing_says_notes_were_skipped() {
    let dirs = common::workspace(&[]);
    let o = run(&dirs, None, &["search", "zebra quokka", "--json"]);
    let v: Value = serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&o)));
    assert!(v["results"].as_array().unwrap().is_empty() && !v["warnings"].to_string().contains("not indexed"), "{v}");

    std::fs::write(dirs.ws.path().join("memory/blob.md"), b"zebra quokka\0").unwrap();
    let o = run(&dirs, None, &["search", "zebra quokka", "--json"]);
    let v: Value = serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&o)));
    assert!(v["results"].as_array().unwrap().is_empty(), "{v}");
    assert!(v["warnings"].to_string().contains("1 memory files are not indexed"), "{v}");
    assert!(v["warnings"].to_string().contains("memory status"), "{v}");
    // As text: on stderr, beside "No results."
    let o = run(&dirs, None, &["search", "zebra quokka"]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("1 memory files are not indexed"), "{}", text(&o));
    // A search that finds something says nothing of them.
    let o = run(&dirs, None, &["search", "gateway", "--json"]);
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(!v["results"].as_array().unwrap().is_empty() && !v["warnings"].to_string().contains("not indexed"), "{v}");
}
