//! Helpers shared by the integration tests: workspaces, configs, the real qmd install, a fake qmd script.
#![allow(dead_code, reason = "each test binary includes this module and uses only some of its helpers")]

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use memory_core::config::Config;
use memory_core::registry::OpenContext;
use memory_qmd::QmdConfig;

/// QMD's JS entry installed by `scripts/setup.sh`. Panics with instructions when it is missing: these tests run
/// the real qmd and must not pass silently without it.
pub fn qmd_entry() -> PathBuf {
    let dir = std::env::var_os("MEMORY_QMD_DIR")
        .map_or_else(|| PathBuf::from(std::env::var_os("HOME").expect("HOME")).join(".cache/memory-rs/qmd"), PathBuf::from);
    let entry = dir.join("node_modules/@tobilu/qmd/dist/cli/qmd.js");
    assert!(
        entry.is_file(),
        "QMD is not installed at {} - run `eval \"$(bash scripts/setup.sh | grep '^export ')\"` first (sets MEMORY_QMD_DIR and MEMORY_NODE22)",
        entry.display()
    );
    let node = memory_qmd::locate::find_node22().unwrap_or_else(|e| panic!("{e}"));
    assert!(node.exists());
    entry
}

pub fn write(root: &Path, rel: &str, text: &str) {
    let p = root.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

/// A config for tests: no timers, boot update awaited, keyword-only builtin.
pub fn config(command: &str) -> Config {
    let mut c = Config::default();
    c.memory.backend = "qmd".into();
    c.memory.search.provider = "none".into();
    c.memory.search.sync.on_search = false;
    c.memory.search.sync.watch = false;
    edit_qmd(&mut c, |q| {
        q.command = Some(command.to_string());
        q.update.on_boot = true;
        q.update.wait_for_boot_sync = true;
        q.update.interval = None;
        q.update.embed_interval = None;
        q.update.update_timeout = Duration::from_secs(60);
        q.limits.timeout = Duration::from_secs(30);
    });
    c
}

/// Change the `memory.qmd` block of `c`.
pub fn edit_qmd(c: &mut Config, edit: impl FnOnce(&mut QmdConfig)) {
    let mut q = QmdConfig::from_config(c).unwrap();
    edit(&mut q);
    q.write_to(c).unwrap();
}

pub fn ctx(config: Config, workspace: &Path, state: &Path) -> OpenContext {
    OpenContext::new(Arc::new(config), workspace, state, "main")
}

/// A temporary folder holding the sample workspace at `ws/`: (the folder, the workspace).
pub fn temp_sample_workspace() -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let ws = tmp.path().join("ws");
    sample_workspace(&ws);
    (tmp, ws)
}

/// A workspace with a few memory files whose lines are known.
pub fn sample_workspace(ws: &Path) {
    write(
        ws,
        "MEMORY.md",
        "# Long-term memory\n\nThe user prefers green tea in the morning.\n\n## Projects\n\nThe rocket project is written in Rust with tokio.\nIts deadline is a Friday.\n",
    );
    write(ws, "memory/2026-11-01.md", "# 2026-11-01\n\n- Met Alice about the budget.\n- Lunch at the harbour.\n");
    write(
        ws,
        "memory/2026-11-02.md",
        "# 2026-11-02\n\n- Standup notes.\n- Reviewed pull requests.\n- The giraffe enclosure migration is scheduled for March.\n- Evening: read a book.\n- Bed early.\n",
    );
    write(ws, "memory/projects/zoo.md", "# Zoo project\n\nWe track penguins and otters.\n");
}

/// A stand-in for qmd: answers `collection`/`update` like qmd, and `search` according to the word in `mode_file`:
/// ok (valid JSON hit), hang (sleeps, with a grandchild), exit1, garbage, crash (half JSON then SIGSEGV), noisy
/// (stderr noise and cursor codes around valid JSON).
pub fn fake_qmd(dir: &Path, mode_file: &Path) -> PathBuf {
    let script = dir.join("fake-qmd");
    let body = format!(
        r##"#!/bin/sh
MODE=$(cat '{mode}' 2>/dev/null || echo ok)
case "$1" in
  collection)
    echo "Indexed: 1 new, 0 updated, 0 unchanged, 0 removed"; exit 0 ;;
  update)
    echo "Indexed: 0 new, 0 updated, 1 unchanged, 0 removed"; exit 0 ;;
  embed)
    exit 0 ;;
esac
case "$MODE" in
  ok)
    cat <<'JSON'
[{{"docid":"#abc123","score":0.9,"file":"qmd://memory-dir/2026-11-02.md","line":5,"title":"2026-11-02","snippet":"@@ -4,3 @@ (3 before, 3 after)\n- Reviewed pull requests.\n- The giraffe enclosure migration is scheduled for March.\n- Evening: read a book."}}]
JSON
    ;;
  noisy)
    printf '\033[?25lQMD Warning: no GPU acceleration\n├─ expanding\n' >&2
    printf 'Warning: something [beta]\n'
    cat <<'JSON'
[{{"docid":"#abc123","score":0.9,"file":"qmd://memory-dir/2026-11-02.md","line":5,"title":"2026-11-02","snippet":"@@ -4,3 @@ (3 before, 3 after)\n- Reviewed pull requests.\n- The giraffe enclosure migration is scheduled for March.\n- Evening: read a book."}}]
JSON
    printf '\033[?25h' ;;
  hang)
    sleep 60 & sleep 60 ;;
  exit1)
    echo "Error: database is locked" >&2; exit 1 ;;
  garbage)
    echo "<html><body>502 Bad Gateway</body></html>" ;;
  crash)
    printf '[{{"docid":"#abc123","score":0.9,"file":"qmd://memo'
    kill -SEGV $$ ;;
esac
"##,
        mode = mode_file.display()
    );
    std::fs::write(&script, body).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    script
}
