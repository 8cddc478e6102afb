//! `memory server start|stop|status|run`: the subcommands, on every platform. Where the shared server exists
//! (Unix) they run in `lifecycle`; elsewhere each says why there is none (and that commands work without it).

use std::path::Path;

use clap::Subcommand;

#[derive(Subcommand, Debug)]
pub enum Action {
    /// Start the server in the background (one per state folder; a second start finds the first).
    Start {
        #[command(flatten)]
        options: RunOptions,
    },
    /// Stop the server (it closes its engines first).
    Stop,
    /// Whether a server runs, its version, engines, requests and memory.
    Status {
        #[arg(long)]
        json: bool,
    },
    /// Run the server in the foreground (what `start` runs in the background).
    Run {
        #[command(flatten)]
        options: RunOptions,
    },
}

#[derive(clap::Args, Debug, Clone)]
#[cfg_attr(not(unix), allow(dead_code, reason = "read by the server, which is Unix's"))]
pub struct RunOptions {
    /// Exit after this many seconds without a request.
    #[arg(long, default_value_t = 1800)]
    pub(super) idle_timeout: u64,
    /// Close an engine (a workspace's index, its model) after this many seconds without a request for it.
    #[arg(long, default_value_t = 600)]
    pub(super) engine_idle: u64,
}

#[cfg(unix)]
pub fn run(action: &Action, state_dir: &Path) -> anyhow::Result<()> {
    use super::lifecycle;
    match action {
        Action::Start { options } => lifecycle::start(state_dir, options),
        Action::Stop => lifecycle::stop(state_dir),
        Action::Status { json } => lifecycle::status(state_dir, *json),
        Action::Run { options } => lifecycle::run_foreground(state_dir, options),
    }
}

/// No shared server here ([`super::AVAILABLE`]): every subcommand says so, and that commands work without it.
#[cfg(not(unix))]
pub fn run(action: &Action, _state_dir: &Path) -> anyhow::Result<()> {
    let name = match action {
        Action::Start { .. } => "start",
        Action::Stop => "stop",
        Action::Status { .. } => "status",
        Action::Run { .. } => "run",
    };
    anyhow::bail!(
        "`memory server {name}`: the shared server needs a Unix socket and is not available on this platform; \
         every command works without it (each opens the index itself)"
    )
}
