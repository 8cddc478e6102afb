//! What the CLI tests share: the built `memory` command on a workspace and a state folder, isolated from the
//! environment a developer's shell may carry (their config, log level, OpenClaw install, agent).
#![allow(dead_code)]

use std::path::Path;
use std::process::Command;

/// `memory --workspace WS --state-dir STATE [--config CONFIG]`, with no inherited config, logs, agent or OpenClaw.
pub fn memory(ws: &Path, state: &Path, config: Option<&Path>) -> Command {
    let mut c = isolated(Command::new(env!("CARGO_BIN_EXE_memory")), state);
    c.arg("--workspace").arg(ws).arg("--state-dir").arg(state);
    if let Some(p) = config {
        c.arg("--config").arg(p);
    }
    c
}

/// `c` without the config, log level, agent or OpenClaw install a developer's shell may carry (OpenClaw's state
/// folder points into `state`, where there is none), and without model downloads (a test that serves one says
/// so: `HF_HUB_OFFLINE` removed, `HF_ENDPOINT` at its own server).
pub fn isolated(mut c: Command, state: &Path) -> Command {
    c.env_remove("MEMORY_CONFIG")
        .env_remove("RUST_LOG")
        .env_remove("MEMORY_AGENT")
        .env("OPENCLAW_STATE_DIR", state.join("no-openclaw"))
        .env_remove("OPENCLAW_CONFIG_PATH")
        .env("HF_HUB_OFFLINE", "1")
        .env_remove("HF_ENDPOINT")
        .env_remove("MODEL_ENDPOINT");
    c
}

/// MEMORY.md of most CLI tests' workspaces: the fact their searches and reads look for.
pub const GATEWAY_NOTE: &str = "# Memory\n\nThe gateway runs on the Mac Studio.\n";

/// A workspace with `memory/`, MEMORY.md ([`GATEWAY_NOTE`]) and `notes` (workspace-relative path, text), and an
/// empty state folder.
pub fn workspace(notes: &[(&str, &str)]) -> conformance::testing::TestDirs {
    let dirs = conformance::testing::TestDirs::new();
    for (rel, text) in [("MEMORY.md", GATEWAY_NOTE)].iter().chain(notes) {
        std::fs::write(dirs.ws.path().join(rel), text).unwrap_or_else(|e| panic!("write {rel}: {e}"));
    }
    dirs
}
