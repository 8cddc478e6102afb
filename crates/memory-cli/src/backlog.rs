//! Files waiting for their vectors get them without anyone running `memory index`.
//!
//! A search or an append waits a few seconds at most for the embedding provider; a first build on a slow provider
//! (a local model server on a CPU) leaves most notes indexed by their words only, and a search never spends its
//! wait on that backlog (the note just written comes first). `memory serve` and `memory watch` embed it in their
//! watcher. A command run one at a time has no watcher: after a search or an append that found files waiting
//! while the provider can embed (however slowly), it starts `memory embed-pending` in the background, detached,
//! which embeds them as the watcher would (each call bounded by the provider's own timeout, outside the index's
//! locks, so searches meanwhile answer at once) and exits. One runs at a time per index (a lock beside it); `MEMORY_BACKGROUND_EMBED=0` turns the start off.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::Context;
use memory_core::{ErrorKind, MemoryBackend, SyncOptions};
use tracing::{debug, info, warn};

use crate::engine::Opened;

/// The environment variable that turns the background start off (`0`, `false`, `no`, `off`).
pub const BACKGROUND_ENV: &str = "MEMORY_BACKGROUND_EMBED";

/// The hidden command the background process runs.
pub const COMMAND: &str = "embed-pending";

/// Syncs one background process runs at most: each embeds every waiting file it can; another round only
/// follows one that made progress and still left some (a provider that failed on the way).
const MAX_ROUNDS: usize = 3;

/// What the background process is started with: the same workspace, config, state folder and agent.
pub struct Target<'a> {
    pub workspace: &'a Path,
    pub config_path: Option<&'a Path>,
    pub state_dir: &'a Path,
    pub agent: &'a str,
}

/// The lock one background process holds while it embeds an index's waiting files, and its log beside it.
fn files(opened: &Opened) -> (PathBuf, PathBuf) {
    let engine = opened.engine.name();
    (opened.space.state_file(engine, ".embed-pending.lock"), opened.space.state_file(engine, ".embed-pending.log"))
}

fn turned_off() -> bool {
    std::env::var(BACKGROUND_ENV).is_ok_and(|v| matches!(v.trim().to_ascii_lowercase().as_str(), "0" | "false" | "no" | "off"))
}

/// After a search or an append: start the background process when files wait for their vectors, the provider
/// can embed (a slow one too: the background process gives each call the provider's own timeout) and none runs
/// yet. Returns whether one was started. Never fails the command: a start that
/// goes wrong is logged.
pub async fn start_if_waiting(opened: &Opened, target: &Target<'_>) -> bool {
    if turned_off() {
        return false;
    }
    let waiting = match opened.engine.vectors_to_catch_up().await {
        Ok(n) => n,
        Err(e) => {
            debug!(error = %e, "cannot count the files waiting for vectors");
            return false;
        }
    };
    if waiting == 0 {
        return false;
    }
    let (lock, log) = files(opened);
    match memory_core::file_lock::lock_file(&lock, false, "embedding").await {
        Ok(free) => drop(free),
        Err(e) if e.kind() == ErrorKind::Unavailable => {
            debug!("a background process already embeds the waiting files");
            return false;
        }
        Err(e) => {
            warn!(error = %e, "cannot start embedding the waiting files in the background");
            return false;
        }
    }
    match spawn(target, &log) {
        Ok(pid) => {
            info!(waiting, pid, log = %log.display(), "embedding the files that wait for vectors in the background");
            true
        }
        Err(e) => {
            warn!(error = %format!("{e:#}"), "cannot start embedding the waiting files in the background");
            false
        }
    }
}

fn spawn(target: &Target<'_>, log: &Path) -> anyhow::Result<u32> {
    let exe = std::env::current_exe().context("cannot find this program")?;
    if let Some(dir) = log.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    let log = std::fs::File::create(log).with_context(|| format!("cannot write {}", log.display()))?;
    let mut command = Command::new(exe);
    command.arg("--workspace").arg(target.workspace).arg("--state-dir").arg(target.state_dir).arg("--agent").arg(target.agent);
    if let Some(config) = target.config_path {
        command.arg("--config").arg(config);
    }
    command.args(["-v", COMMAND]).env("MEMORY_NO_SERVER", "1").stdin(Stdio::null()).stdout(Stdio::null()).stderr(log);
    #[cfg(unix)]
    {
        // Its own process group: a Ctrl-C meant for the terminal's next command does not reach it.
        use std::os::unix::process::CommandExt;
        command.process_group(0);
    }
    // Not waited for: it outlives this command, and the system reaps it.
    let child = command.spawn().context("cannot start the background process")?;
    Ok(child.id())
}

/// `memory embed-pending`: embed the files waiting for their vectors, beside searches, then exit. Another process
/// doing it already: nothing to do.
pub async fn run(opened: &Opened) -> anyhow::Result<()> {
    let (lock, _) = files(opened);
    let _held = match memory_core::file_lock::lock_file(&lock, false, "embedding").await {
        Ok(held) => held,
        Err(e) if e.kind() == ErrorKind::Unavailable => {
            info!("another process embeds the waiting files");
            return Ok(());
        }
        Err(e) => return Err(e.into()),
    };
    let engine: &dyn MemoryBackend = opened.engine.as_ref();
    for round in 1..=MAX_ROUNDS {
        let report = engine.sync(SyncOptions::beside_searches()).await?;
        info!(round, embedded = report.chunks_embedded, waiting = report.files_pending, "embedded files that waited for vectors");
        for w in &report.warnings {
            warn!("{w}");
        }
        if report.files_pending == 0 || report.chunks_embedded == 0 {
            break;
        }
    }
    Ok(())
}
