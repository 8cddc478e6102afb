//! What the CLI tests share: the built `memory` command on a workspace and a state folder, isolated from the
//! environment a developer's shell may carry (their config, log level, OpenClaw install, agent).
#![allow(dead_code)]

use std::path::Path;
use std::process::Command;

/// `memory --workspace WS --state-dir STATE [--config CONFIG]`, with no inherited config, logs, agent or OpenClaw.
pub fn memory(ws: &Path, state: &Path, config: Option<&Path>) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_memory"));
    c.arg("--workspace").arg(ws).arg("--state-dir").arg(state);
    if let Some(p) = config {
        c.arg("--config").arg(p);
    }
    c.env_remove("MEMORY_CONFIG")
        .env_remove("RUST_LOG")
        .env_remove("MEMORY_AGENT")
        .env("OPENCLAW_STATE_DIR", state.join("no-openclaw"))
        .env_remove("OPENCLAW_CONFIG_PATH");
    c
}
