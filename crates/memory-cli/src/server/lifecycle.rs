//! What `memory server start|stop|status|run` do (Unix): one server per state folder, held by an advisory lock on
//! `server.lock` (the OS releases it when the process dies, so a killed server never blocks the next one); its
//! pid in `server.pid`, its log in `server.log`, its socket `server.sock` (all mode 0600). Files left behind by
//! a killed server are removed by the next start, status or stop.

use std::fs::File;
use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};

use super::client;
use super::control::RunOptions;
use super::protocol::{build_identity, Paths, ServerInfo};

/// How long `start` waits for the new server to answer, and `stop` for the old one to go.
const START_WAIT: Duration = Duration::from_secs(15);

/// The server lock, if no server holds it.
fn try_lock(paths: &Paths) -> anyhow::Result<Option<File>> {
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .mode(0o600)
        .open(&paths.lock)
        .with_context(|| format!("cannot open {}", paths.lock.display()))?;
    match file.try_lock() {
        Ok(()) => Ok(Some(file)),
        Err(std::fs::TryLockError::WouldBlock) => Ok(None),
        Err(std::fs::TryLockError::Error(e)) => Err(e).with_context(|| format!("cannot lock {}", paths.lock.display())),
    }
}

/// Remove what a killed server left (socket, pid file), holding the lock. True when something was removed.
fn remove_stale(paths: &Paths) -> bool {
    let mut removed = false;
    for p in [&paths.socket, &paths.pid] {
        match std::fs::remove_file(p) {
            Ok(()) => {
                tracing::info!(path = %p.display(), "removed a file a stopped server left");
                removed = true;
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => tracing::warn!(path = %p.display(), error = %e, "cannot remove a stale server file"),
        }
    }
    removed
}

/// The pid the server wrote; never 0, 1 or negative (to `kill`, those mean a process group, init, or everyone).
fn read_pid(paths: &Paths) -> Option<i32> {
    std::fs::read_to_string(&paths.pid).ok()?.trim().parse().ok().filter(|p: &i32| *p > 1)
}

pub(super) fn run_foreground(state_dir: &Path, options: &RunOptions) -> anyhow::Result<()> {
    std::fs::create_dir_all(state_dir).with_context(|| format!("cannot create {}", state_dir.display()))?;
    let paths = Paths::new(state_dir);
    let Some(lock) = try_lock(&paths)? else {
        bail!("a server already runs for {} (pid {})", state_dir.display(), read_pid(&paths).map_or("?".into(), |p| p.to_string()));
    };
    remove_stale(&paths);
    {
        use std::os::unix::fs::OpenOptionsExt;
        let mut pid = std::fs::OpenOptions::new().create(true).truncate(true).write(true).mode(0o600).open(&paths.pid)?;
        writeln!(pid, "{}", std::process::id())?;
    }
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().context("cannot start the runtime")?;
    let options =
        super::daemon::Options { idle_timeout: Duration::from_secs(options.idle_timeout), engine_idle: Duration::from_secs(options.engine_idle) };
    let result = rt.block_on(async {
        let listener = super::daemon::bind(&paths.socket)?;
        super::daemon::serve(listener, state_dir.to_path_buf(), options).await
    });
    // Gone before the lock is released: the next server finds a clean folder.
    for p in [&paths.socket, &paths.pid] {
        if let Err(e) = std::fs::remove_file(p) {
            tracing::warn!(path = %p.display(), error = %e, "cannot remove the server's file");
        }
    }
    drop(lock);
    result
}

pub(super) fn start(state_dir: &Path, options: &RunOptions) -> anyhow::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    use std::os::unix::process::CommandExt;
    if let Ok(info) = client::ping(state_dir) {
        return already(&info);
    }
    std::fs::create_dir_all(state_dir).with_context(|| format!("cannot create {}", state_dir.display()))?;
    let state_dir = std::fs::canonicalize(state_dir)?;
    let paths = Paths::new(&state_dir);
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .open(&paths.log)
        .with_context(|| format!("cannot open {}", paths.log.display()))?;
    let exe = std::env::current_exe().context("cannot find this program")?;
    let mut child = std::process::Command::new(exe)
        .arg("--state-dir")
        .arg(&state_dir)
        .arg("-v")
        .args(["server", "run", "--idle-timeout", &options.idle_timeout.to_string(), "--engine-idle", &options.engine_idle.to_string()])
        .stdin(std::process::Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log)
        // Its own process group: the terminal's Ctrl-C does not reach it.
        .process_group(0)
        .spawn()
        .context("cannot start the server")?;
    let started = Instant::now();
    loop {
        if let Ok(info) = client::ping(&state_dir) {
            if info.pid == child.id() {
                println!("Server started (pid {}); socket {}; log {}", info.pid, info.socket, paths.log.display());
                return Ok(());
            }
            // Another start won the race: the one server is that one.
            let _ = child.wait();
            return already(&info);
        }
        if let Some(status) = child.try_wait()? {
            // It found a server starting (the lock held): wait for that one to answer.
            if let Ok(info) = wait_for_server(&state_dir, started) {
                return already(&info);
            }
            bail!("the server exited ({status}) without answering; see {}", paths.log.display());
        }
        if started.elapsed() > START_WAIT {
            bail!("the server did not answer within {} s; see {}", START_WAIT.as_secs(), paths.log.display());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn wait_for_server(state_dir: &Path, started: Instant) -> anyhow::Result<ServerInfo> {
    loop {
        match client::ping(state_dir) {
            Ok(info) => return Ok(info),
            Err(e) if started.elapsed() > START_WAIT => bail!("no server answers: {e}"),
            Err(_) => std::thread::sleep(Duration::from_millis(20)),
        }
    }
}

fn already(info: &ServerInfo) -> anyhow::Result<()> {
    if info.version != build_identity() {
        bail!("a server of another build runs (pid {}, {}); stop it with `memory server stop`, then start again", info.pid, info.version);
    }
    println!("Server already running (pid {}); socket {}", info.pid, info.socket);
    Ok(())
}

pub(super) fn stop(state_dir: &Path) -> anyhow::Result<()> {
    let paths = Paths::new(state_dir);
    let asked = client::stop(state_dir);
    if let Err(e) = &asked {
        tracing::debug!(error = %e, "the server did not take a stop request");
    }
    let started = Instant::now();
    let mut signalled = false;
    loop {
        if let Some(lock) = try_lock(&paths)? {
            let stale = remove_stale(&paths);
            drop(lock);
            match (&asked, signalled, stale) {
                (Ok(()), _, _) | (_, true, _) => println!("Server stopped"),
                (_, _, true) => println!("No server running (removed the files a stopped server left)"),
                _ => println!("No server running"),
            }
            return Ok(());
        }
        // Held but not answering (hung, or of a protocol that cannot read the request): SIGTERM it.
        if asked.is_err() && !signalled {
            if let Some(pid) = read_pid(&paths) {
                tracing::info!(pid, "the server does not answer; sending SIGTERM");
                // SAFETY: kill(2) takes plain integers and touches no memory of ours; `pid` is > 1 (`read_pid`), a
                // single process: the one that holds the server lock and wrote the pid file.
                if unsafe { libc::kill(pid, libc::SIGTERM) } != 0 {
                    bail!("the server (pid {pid}) does not answer and cannot be signalled: {}", std::io::Error::last_os_error());
                }
                signalled = true;
            }
        }
        if started.elapsed() > START_WAIT {
            bail!("the server has not stopped after {} s (pid {})", START_WAIT.as_secs(), read_pid(&paths).map_or("?".into(), |p| p.to_string()));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

pub(super) fn status(state_dir: &Path, json: bool) -> anyhow::Result<()> {
    let paths = Paths::new(state_dir);
    let mut out = std::io::stdout().lock();
    match client::ping(state_dir) {
        Ok(info) => {
            let this_build = info.version == build_identity();
            if json {
                let mut v = serde_json::to_value(&info)?;
                v["running"] = true.into();
                v["sameBuild"] = this_build.into();
                writeln!(out, "{}", serde_json::to_string_pretty(&v)?)?;
            } else {
                writeln!(out, "Server:     running (pid {}), up {} s", info.pid, info.uptime_ms / 1000)?;
                writeln!(out, "Socket:     {}", info.socket)?;
                writeln!(out, "Build:      {}{}", info.version, if this_build { "" } else { " (another build: this command answers in-process)" })?;
                writeln!(out, "Requests:   {}", info.requests)?;
                if let Some(rss) = info.rss_bytes {
                    writeln!(out, "Memory:     {:.1} MiB resident", rss as f64 / (1024.0 * 1024.0))?;
                }
                writeln!(out, "Idle exit:  after {} s unused; engines closed after {} s", info.idle_timeout_s, info.engine_idle_s)?;
                for e in &info.engines {
                    writeln!(out, "Engine:     {} (agent {}), idle {} s", e.workspace, e.agent, e.idle_ms / 1000)?;
                }
            }
        }
        Err(e) => {
            tracing::debug!(error = %e, "no server answered");
            let stale = match try_lock(&paths) {
                Ok(Some(lock)) => {
                    let stale = remove_stale(&paths);
                    drop(lock);
                    stale
                }
                Ok(None) => {
                    if json {
                        writeln!(out, "{}", serde_json::json!({ "running": true, "answering": false, "pid": read_pid(&paths) }))?;
                    } else {
                        writeln!(out, "Server:     running (pid {}) but not answering", read_pid(&paths).map_or("?".into(), |p| p.to_string()))?;
                    }
                    return Ok(());
                }
                Err(e) => return Err(e),
            };
            if json {
                writeln!(out, "{}", serde_json::json!({ "running": false, "removedStaleFiles": stale }))?;
            } else {
                writeln!(out, "Server:     not running{}", if stale { " (removed the files a stopped server left)" } else { "" })?;
            }
        }
    }
    Ok(())
}
