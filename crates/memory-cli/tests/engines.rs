//! The engines behind the production wiring (`memory.backend` through the CLI's registry, with the builtin
//! fallback around every other engine), driven through the built binary as a user runs it (issue 19).

use std::fs;
use std::process::Output;

use conformance::testing::TestDirs;
use serde_json::Value;

mod common;

struct Env {
    ws: tempfile::TempDir,
    state: tempfile::TempDir,
    config: std::path::PathBuf,
}

impl Env {
    fn new(config: &str) -> Env {
        let TestDirs { ws, state } = common::workspace(&[("memory/2026-11-30.md", "# 2026-11-30\n\n- The cat is named Miso.\n")]);
        let path = state.path().join("config.json5");
        fs::write(&path, config).unwrap();
        Env { ws, state, config: path }
    }

    fn run(&self, args: &[&str]) -> Output {
        common::memory(self.ws.path(), self.state.path(), Some(&self.config)).args(args).output().unwrap()
    }

    fn json(&self, args: &[&str]) -> Value {
        let o = self.run(args);
        assert!(o.status.success(), "memory {args:?}: {}", String::from_utf8_lossy(&o.stderr));
        serde_json::from_slice(&o.stdout).unwrap()
    }
}

fn paths(v: &Value) -> Vec<String> {
    v["results"].as_array().unwrap().iter().map(|r| r["path"].as_str().unwrap().to_string()).collect()
}

/// An executable shell script `dir/qmd` with this body.
// Unix only: a stand-in qmd is a shell script.
#[cfg(unix)]
fn qmd_script(dir: &std::path::Path, body: &str) -> std::path::PathBuf {
    let p = dir.join("qmd");
    fs::write(&p, format!("#!/bin/sh\n{body}\n")).unwrap();
    let mut perm = fs::metadata(&p).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perm, 0o755);
    fs::set_permissions(&p, perm).unwrap();
    p
}

/// A `qmd` that hangs (every call costs its timeout) and logs each call to `calls.log` beside it.
// Unix only: a stand-in qmd is a shell script.
#[cfg(unix)]
fn hanging_qmd(dir: &std::path::Path) -> std::path::PathBuf {
    qmd_script(dir, &format!("echo \"$@\" >> {:?}\nsleep 30", dir.join("calls.log")))
}

// Unix only: a stand-in qmd is a shell script.
#[cfg(unix)]
#[test]
fn a_broken_qmd_is_answered_by_builtin_and_the_next_run_does_not_wait_for_it_again() {
    let bin = tempfile::tempdir().unwrap();
    let qmd = hanging_qmd(bin.path());
    let env = Env::new(&format!(
        r#"{{ memory: {{ backend: "qmd", qmd: {{ command: {:?}, limits: {{ timeoutMs: 1000 }}, update: {{ waitForBootSync: true, commandTimeoutMs: 1000, updateTimeoutMs: 1000 }} }} }} }}"#,
        qmd.to_str().unwrap()
    ));
    let calls = || fs::read_to_string(bin.path().join("calls.log")).unwrap_or_default().lines().count();
    let v = env.json(&["search", "Miso", "--json"]);
    assert_eq!(paths(&v), ["memory/2026-11-30.md"], "{v}");
    assert!(v["warnings"].to_string().contains("fallback"), "{v}");
    let tried = calls();
    assert!(tried > 0, "qmd was never tried");
    // The failure is kept beside the index: the next one-shot runs answer from builtin without trying qmd.
    let v = env.json(&["search", "gateway", "--json"]);
    assert_eq!(paths(&v), ["MEMORY.md"], "{v}");
    assert!(v["warnings"].to_string().contains("fallback"), "{v}");
    assert_eq!(calls(), tried, "the second run called the dead qmd again");
    let st = env.json(&["status", "--json"]);
    assert_eq!(st["fallback"]["from"], "qmd", "{st}");
    // While degraded, the capabilities are the fallback's, and reset reaches the index that answers.
    assert_eq!(st["backend"], "builtin", "{st}");
    let o = env.run(&["reset", "--yes"]);
    assert!(o.status.success(), "reset: {}", String::from_utf8_lossy(&o.stderr));
}

// Unix only: QMD is run through a shell-script wrapper.
#[cfg(unix)]
#[test]
fn the_real_qmd_behind_the_fallback_answers_and_resets() {
    let Some(dir) = std::env::var_os("MEMORY_QMD_DIR").filter(|d| !d.is_empty()) else {
        conformance::testing::missing_prerequisite(
            "the_real_qmd_behind_the_fallback_answers_and_resets",
            "MEMORY_QMD_DIR is not set (scripts/setup.sh installs QMD)",
        );
        return;
    };
    let node = std::env::var_os("MEMORY_NODE22").expect("MEMORY_NODE22 is set beside MEMORY_QMD_DIR");
    let entry = std::path::Path::new(&dir).join("node_modules/@tobilu/qmd/dist/cli/qmd.js");
    let bin = tempfile::tempdir().unwrap();
    let wrapper = qmd_script(bin.path(), &format!("exec {node:?} {entry:?} \"$@\""));
    let env = Env::new(&format!(
        r#"{{ memory: {{ backend: "qmd", qmd: {{ command: {:?}, update: {{ waitForBootSync: true }} }} }} }}"#,
        wrapper.to_str().unwrap()
    ));
    let v = env.json(&["search", "Miso", "--json"]);
    assert_eq!(paths(&v), ["memory/2026-11-30.md"], "{v}");
    assert!(!v["warnings"].to_string().contains("fallback"), "qmd itself should answer: {v}");
    // Written a moment ago: qmd updates before it searches.
    fs::write(env.ws.path().join("memory/garden.md"), "The tomatoes need watering on Sundays.\n").unwrap();
    let v = env.json(&["search", "tomatoes", "--json"]);
    assert_eq!(paths(&v), ["memory/garden.md"], "{v}");
    fs::remove_file(env.ws.path().join("memory/garden.md")).unwrap();
    let v = env.json(&["search", "tomatoes", "--json"]);
    assert!(paths(&v).is_empty(), "a deleted note was returned: {v}");
    let st = env.json(&["status", "--json"]);
    assert_eq!(st["backend"], "qmd", "{st}");
    let o = env.run(&["reset", "--yes"]);
    assert!(o.status.success(), "reset through the fallback wiring: {}", String::from_utf8_lossy(&o.stderr));
    // After a reset qmd indexes again and answers.
    let v = env.json(&["search", "gateway", "--json"]);
    assert_eq!(paths(&v), ["MEMORY.md"], "{v}");
    assert!(!v["warnings"].to_string().contains("fallback"), "{v}");
}

#[test]
fn lancedb_through_the_cli_searches_fresh_files_and_resets() {
    let env = Env::new(r#"{ memory: { backend: "lancedb" } }"#);
    let o = env.run(&["search", "Miso", "--json"]);
    if !o.status.success() && String::from_utf8_lossy(&o.stderr).contains("built without the lancedb engine") {
        conformance::testing::missing_prerequisite(
            "lancedb_through_the_cli_searches_fresh_files_and_resets",
            "this memory binary was built without the lancedb feature",
        );
        return;
    }
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(paths(&v), ["memory/2026-11-30.md"], "{v}");
    assert!(!v["warnings"].to_string().contains("fallback"), "lancedb itself should answer: {v}");
    fs::write(env.ws.path().join("memory/garden.md"), "The tomatoes need watering on Sundays.\n").unwrap();
    assert_eq!(paths(&env.json(&["search", "tomatoes", "--json"])), ["memory/garden.md"]);
    let st = env.json(&["status", "--json"]);
    assert_eq!(st["backend"], "lancedb", "{st}");
    assert_eq!(st["files"], 3, "{st}");
    let o = env.run(&["reset", "--yes"]);
    assert!(o.status.success(), "reset: {}", String::from_utf8_lossy(&o.stderr));
    let st = env.json(&["status", "--json"]);
    assert_eq!(st["files"], 0, "{st}");
    // The next search indexes again.
    assert_eq!(paths(&env.json(&["search", "tomatoes", "--json"])), ["memory/garden.md"]);
}

#[test]
fn a_bad_value_in_an_engine_block_is_named_by_status_and_search_even_while_the_fallback_answers() {
    // qmd cannot start: its failure is recorded and builtin answers (the next runs skip qmd during the back-off).
    let env = Env::new(r#"{ memory: { backend: "qmd", qmd: { command: "/nonexistent/qmd" } } }"#);
    let v = env.json(&["search", "Miso", "--json"]);
    assert!(v["warnings"].to_string().contains("fallback"), "{v}");
    fs::write(&env.config, r#"{ memory: { backend: "qmd", qmd: { command: "/nonexistent/qmd", update: { interval: "soon" } } } }"#).unwrap();
    for args in [&["status"][..], &["search", "Miso"]] {
        let o = env.run(args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success() && err.contains("memory.qmd.update.interval") && err.contains("`soon` is not a duration"), "{args:?}: {err}");
    }
    // Another engine's block is checked too, as the rest of the file is.
    fs::write(&env.config, r#"{ memory: { backend: "builtin", qmd: { searchMode: "fast" } } }"#).unwrap();
    let o = env.run(&["status"]);
    assert!(!o.status.success() && String::from_utf8_lossy(&o.stderr).contains("memory.qmd.searchMode"), "{}", String::from_utf8_lossy(&o.stderr));
    fs::write(&env.config, r#"{ memory: { backend: "lancedb", lancedb: { nprobes: 0 } } }"#).unwrap();
    let o = env.run(&["search", "Miso"]);
    let err = String::from_utf8_lossy(&o.stderr);
    if err.contains("built without the lancedb engine") {
        conformance::testing::missing_prerequisite(
            "a_bad_value_in_an_engine_block_is_named_by_status_and_search_even_while_the_fallback_answers (lancedb part)",
            "this memory binary was built without the lancedb feature",
        );
        return;
    }
    assert!(!o.status.success() && err.contains("memory.lancedb.nprobes") && err.contains("must be at least 1"), "{err}");
}

/// Each engine owns its block's keys: an unknown key there or a block of no engine is an error naming it, and
/// OpenClaw's qmd keys that memory-rs does not act on are listed by `status` (the QMD engine says which).
#[test]
fn engine_blocks_are_checked_by_their_engines_whichever_engine_is_configured() {
    let env = Env::new(r#"{ memory: { backend: "builtin", qmd: { command: "qmd", mcporter: { enabled: false }, update: { startup: "boot" } } } }"#);
    let v = env.json(&["status", "--json"]);
    let warned: Vec<&str> = v["configWarnings"].as_array().unwrap().iter().map(|w| w["key"].as_str().unwrap()).collect();
    assert_eq!(warned, ["memory.qmd.mcporter", "memory.qmd.update.startup"], "{v}");
    assert_eq!(paths(&env.json(&["search", "Miso", "--json"])), ["memory/2026-11-30.md"]);
    for (config, key) in [
        (r#"{ memory: { backend: "builtin", qmd: { comand: "qmd" } } }"#, "memory.qmd.comand"),
        (r#"{ memory: { backend: "builtin", qdm: { command: "qmd" } } }"#, "memory.qdm"),
    ] {
        fs::write(&env.config, config).unwrap();
        let o = env.run(&["search", "Miso"]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success() && err.contains(key), "{config}: {err}");
    }
    fs::write(&env.config, r#"{ memory: { backend: "builtin", lancedb: { urii: "x" } } }"#).unwrap();
    let o = env.run(&["status", "--json"]);
    if o.status.success() {
        // A build without LanceDB cannot check the block: status says so instead of accepting it silently.
        let v: Value = serde_json::from_slice(&o.stdout).unwrap();
        assert!(v["configWarnings"].to_string().contains("no lancedb engine"), "{v}");
        conformance::testing::missing_prerequisite(
            "engine_blocks_are_checked_by_their_engines_whichever_engine_is_configured (lancedb part)",
            "this memory binary was built without the lancedb feature",
        );
        return;
    }
    assert!(String::from_utf8_lossy(&o.stderr).contains("memory.lancedb.urii"), "{}", String::from_utf8_lossy(&o.stderr));
}
