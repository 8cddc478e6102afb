//! Running one `qmd` subprocess: its own process group, a hard timeout, the whole group killed on timeout
//! (and on drop), stdout/stderr captured with caps, exit codes mapped to typed errors.

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};

use memory_core::error::MemoryError;
use tokio::io::{AsyncRead, AsyncReadExt};
use tracing::{debug, warn};

/// Most stdout kept (QMD's JSON for a few results is small; a runaway command must not eat memory).
const STDOUT_CAP: usize = 16 * 1024 * 1024;
/// Tail of stderr kept for error messages.
const STDERR_CAP: usize = 64 * 1024;
/// How long to wait for the pipes to close once the process group is gone.
const PIPE_GRACE: Duration = Duration::from_millis(500);

/// How to start `qmd`: a program and the arguments before the subcommand (e.g. Node 22 and QMD's JS entry).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invocation {
    pub program: PathBuf,
    pub pre_args: Vec<OsString>,
}

impl Invocation {
    pub fn describe(&self) -> String {
        let mut s = self.program.display().to_string();
        for a in &self.pre_args {
            s.push(' ');
            s.push_str(&a.to_string_lossy());
        }
        s
    }
}

/// Where and how a command runs.
#[derive(Debug, Clone)]
pub struct RunSpec<'a> {
    pub invocation: &'a Invocation,
    pub args: Vec<String>,
    pub env: Vec<(String, String)>,
    pub cwd: PathBuf,
    pub timeout: Duration,
}

/// A finished command.
#[derive(Debug, Clone)]
pub struct Output {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
    pub stdout_truncated: bool,
    pub elapsed: Duration,
}

/// Why a command did not produce a usable result.
#[derive(Debug)]
pub enum RunError {
    /// The program could not be started.
    Spawn(std::io::Error),
    /// Still running at the deadline; its process group was killed.
    Timeout { after: Duration, stderr: String },
    /// Killed by a signal (a crash).
    Signal { signal: i32, stderr: String },
    /// Exited with a non-zero code.
    Exit { code: i32, stdout: String, stderr: String },
}

impl RunError {
    /// The typed error for the engine, with `what` naming the step ("qmd search").
    pub fn into_memory_error(self, what: &str) -> MemoryError {
        match self {
            RunError::Spawn(e) if e.kind() == std::io::ErrorKind::NotFound => MemoryError::Unavailable(format!("{what}: command not found ({e})")),
            RunError::Spawn(e) => MemoryError::Unavailable(format!("{what}: cannot start ({e})")),
            RunError::Timeout { after, stderr } => {
                MemoryError::Unavailable(format!("{what} timed out after {} ms and was killed{}", after.as_millis(), tail_note(&stderr)))
            }
            RunError::Signal { signal, stderr } => MemoryError::Unavailable(format!("{what} crashed (signal {signal}){}", tail_note(&stderr))),
            RunError::Exit { code, stderr, stdout } => {
                let msg = last_meaningful_line(&stderr).or_else(|| last_meaningful_line(&stdout));
                MemoryError::Unavailable(format!("{what} failed with exit code {code}{}", msg.map(|m| format!(": {m}")).unwrap_or_default()))
            }
        }
    }

    pub fn stderr(&self) -> &str {
        match self {
            RunError::Spawn(_) => "",
            RunError::Timeout { stderr, .. } | RunError::Signal { stderr, .. } | RunError::Exit { stderr, .. } => stderr,
        }
    }
}

fn tail_note(stderr: &str) -> String {
    last_meaningful_line(stderr).map(|m| format!(": {m}")).unwrap_or_default()
}

/// The line of `text` that best says what went wrong: the last error-like line (ANSI codes stripped; stack
/// frames, hints and dumped object fields skipped), else the last line that says anything.
pub fn last_meaningful_line(text: &str) -> Option<String> {
    let clean = strip_ansi(text);
    let lines: Vec<&str> = clean.lines().map(str::trim).filter(|l| !l.is_empty()).collect();
    let is_field = |l: &str| {
        // `statusCode: 404,` / `responseHeaders: undefined` lines of a dumped JS object.
        let Some((k, _)) = l.split_once(": ") else { return false };
        k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            && (l.ends_with(',') || !l.contains(' ') || k.chars().next().is_some_and(|c| c.is_ascii_lowercase()))
    };
    let skip = |l: &str| {
        l.starts_with("at ")
            || l.starts_with("If qmd still behaves")
            || l.starts_with("Node.js v")
            || l.starts_with("file://")
            || l.starts_with("throw ")
            || l.chars().all(|c| c == '^' || c == ' ')
            || l == "}"
            || l.ends_with('{')
            || is_field(l)
    };
    let candidates: Vec<&str> = lines.iter().copied().filter(|l| !skip(l)).collect();
    let errorish = |l: &str| {
        let low = l.to_ascii_lowercase();
        ["error", "failed", "status code", "not found", "cannot", "denied", "fatal", "abort"].iter().any(|p| low.contains(p))
    };
    let pick = candidates.iter().rev().find(|l| errorish(l)).or(candidates.last()).or(lines.last())?;
    let mut s: String = pick.chars().take(300).collect();
    if pick.chars().count() > 300 {
        s.push('…');
    }
    Some(s)
}

/// Remove ANSI escape sequences (colours, cursor codes) and carriage-return progress redraws.
pub fn strip_ansi(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            match chars.peek() {
                Some('[') => {
                    chars.next();
                    // CSI: parameters and intermediates, then one final byte in @..~
                    for c2 in chars.by_ref() {
                        if ('@'..='~').contains(&c2) {
                            break;
                        }
                    }
                }
                Some(']') => {
                    chars.next();
                    // OSC: until BEL or ESC \
                    while let Some(c2) = chars.next() {
                        if c2 == '\u{7}' {
                            break;
                        }
                        if c2 == '\u{1b}' {
                            chars.next();
                            break;
                        }
                    }
                }
                Some(_) => {
                    chars.next();
                }
                None => {}
            }
        } else if c == '\r' {
            // A progress redraw: keep only what follows on the line.
            if chars.peek() != Some(&'\n') {
                if let Some(nl) = out.rfind('\n') {
                    out.truncate(nl + 1);
                } else {
                    out.clear();
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// Kills a process group when dropped (a cancelled search must not leave `qmd` running).
struct GroupGuard {
    pgid: Option<i32>,
}

impl GroupGuard {
    fn kill(&mut self) {
        if let Some(pgid) = self.pgid.take() {
            kill_group(pgid);
        }
    }
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        self.kill();
    }
}

#[cfg(unix)]
fn kill_group(pgid: i32) {
    if pgid <= 1 {
        return;
    }
    // SAFETY: killpg only sends a signal; the group was created for this command (process_group(0)).
    let rc = unsafe { libc::killpg(pgid, libc::SIGKILL) };
    if rc == 0 {
        debug!(pgid, "killed process group");
    }
}

/// Without process groups (Windows) the child itself is killed on drop (`kill_on_drop`); what it started may
/// outlive it.
#[cfg(not(unix))]
fn kill_group(_pgid: i32) {}

async fn read_capped<R: AsyncRead + Unpin>(mut r: R, cap: usize, keep_tail: bool) -> (Vec<u8>, bool) {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    let mut truncated = false;
    loop {
        match r.read(&mut chunk).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                buf.extend_from_slice(&chunk[..n]);
                if buf.len() > cap {
                    truncated = true;
                    if keep_tail {
                        let cut = buf.len() - cap;
                        buf.drain(..cut);
                    } else {
                        buf.truncate(cap);
                    }
                }
            }
        }
    }
    (buf, truncated)
}

/// Run a command to completion or to its timeout.
pub async fn run(spec: RunSpec<'_>) -> Result<Output, RunError> {
    let started = Instant::now();
    let mut cmd = tokio::process::Command::new(&spec.invocation.program);
    cmd.args(&spec.invocation.pre_args)
        .args(&spec.args)
        .current_dir(&spec.cwd)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        // QMD refuses model operations when the host's environment says CI=true; the engine must behave the same
        // wherever its host runs.
        .env_remove("CI");
    // Its own process group, so that a timeout kills what QMD started too (node's workers).
    #[cfg(unix)]
    cmd.process_group(0);
    for (k, v) in &spec.env {
        cmd.env(k, v);
    }
    debug!(command = %spec.invocation.describe(), args = ?spec.args, timeout_ms = spec.timeout.as_millis() as u64, "running qmd");
    let mut child = cmd.spawn().map_err(RunError::Spawn)?;
    let mut guard = GroupGuard { pgid: child.id().map(|p| p as i32) };
    let stdout = child.stdout.take().expect("stdout piped");
    let stderr = child.stderr.take().expect("stderr piped");
    let out_task = tokio::spawn(read_capped(stdout, STDOUT_CAP, false));
    let err_task = tokio::spawn(read_capped(stderr, STDERR_CAP, true));

    let waited = tokio::time::timeout(spec.timeout, child.wait()).await;
    // Whatever happened, nothing of the group may outlive the command (a launcher's child, a hung helper).
    guard.kill();
    let status = match waited {
        Ok(Ok(status)) => Some(status),
        Ok(Err(e)) => {
            warn!(error = %e, "waiting for qmd failed");
            None
        }
        Err(_) => {
            let _ = child.kill().await;
            None
        }
    };
    let (stdout, stdout_truncated) = match tokio::time::timeout(PIPE_GRACE, out_task).await {
        Ok(Ok(v)) => v,
        _ => (Vec::new(), true),
    };
    let (stderr, _) = match tokio::time::timeout(PIPE_GRACE, err_task).await {
        Ok(Ok(v)) => v,
        _ => (Vec::new(), false),
    };
    let stdout = String::from_utf8_lossy(&stdout).into_owned();
    let stderr = String::from_utf8_lossy(&stderr).into_owned();
    let elapsed = started.elapsed();
    let Some(status) = status else {
        return Err(RunError::Timeout { after: elapsed, stderr });
    };
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        if let Some(signal) = status.signal() {
            return Err(RunError::Signal { signal, stderr });
        }
    }
    let code = status.code().unwrap_or(-1);
    debug!(code, elapsed_ms = elapsed.as_millis() as u64, "qmd finished");
    if code != 0 {
        return Err(RunError::Exit { code, stdout, stderr });
    }
    Ok(Output { code, stdout, stderr, stdout_truncated, elapsed })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sh(script: &str) -> Invocation {
        Invocation { program: "/bin/sh".into(), pre_args: vec!["-c".into(), script.into(), "sh".into()] }
    }

    fn spec(inv: &Invocation, timeout_ms: u64) -> RunSpec<'_> {
        RunSpec { invocation: inv, args: vec![], env: vec![], cwd: std::env::temp_dir(), timeout: Duration::from_millis(timeout_ms) }
    }

    #[tokio::test]
    async fn captures_stdout_and_stderr() {
        let inv = sh("echo out; echo err >&2");
        let out = run(spec(&inv, 5000)).await.unwrap();
        assert_eq!(out.stdout, "out\n");
        assert_eq!(out.stderr, "err\n");
    }

    #[tokio::test]
    async fn timeout_kills_the_whole_group() {
        let dir = tempfile::tempdir().unwrap();
        let pidfile = dir.path().join("pid");
        // A grandchild that would outlive its parent, holding the pipes open.
        let inv = sh(&format!("sleep 30 & echo $! > {}; wait", pidfile.display()));
        let t = Instant::now();
        let err = run(spec(&inv, 300)).await.unwrap_err();
        assert!(matches!(err, RunError::Timeout { .. }), "{err:?}");
        assert!(t.elapsed() < Duration::from_secs(3), "took {:?}", t.elapsed());
        let pid: i32 = std::fs::read_to_string(&pidfile).unwrap().trim().parse().unwrap();
        // The grandchild is gone (or a zombie about to be reaped by init).
        let mut gone = false;
        for _ in 0..50 {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            if stat.is_empty() || stat.contains(") Z ") {
                gone = true;
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(gone, "sleep {pid} survived the timeout");
        let msg = err.into_memory_error("qmd search").to_string();
        assert!(msg.contains("timed out"), "{msg}");
    }

    #[tokio::test]
    async fn exit_codes_and_signals_are_typed() {
        let inv = sh("echo 'Collection not found: x' >&2; exit 3");
        let err = run(spec(&inv, 5000)).await.unwrap_err();
        assert!(matches!(err, RunError::Exit { code: 3, .. }), "{err:?}");
        let e = err.into_memory_error("qmd search");
        assert_eq!(e.kind(), memory_core::ErrorKind::Unavailable);
        assert!(e.to_string().contains("exit code 3: Collection not found: x"), "{e}");

        let inv = sh("kill -SEGV $$");
        let err = run(spec(&inv, 5000)).await.unwrap_err();
        assert!(matches!(err, RunError::Signal { signal: 11, .. }), "{err:?}");

        let inv = Invocation { program: "/nonexistent/qmd".into(), pre_args: vec![] };
        let err = run(spec(&inv, 5000)).await.unwrap_err();
        assert!(err.into_memory_error("qmd").to_string().contains("not found"));
    }

    #[test]
    fn ansi_and_progress_are_stripped() {
        let s = "\u{1b}[?25lIndexing 10%\rIndexing 100%\n\u{1b}[32mdone\u{1b}[0m\n";
        assert_eq!(strip_ansi(s), "Indexing 100%\ndone\n");
        let trace = "Error: boom\n    at foo (x.js:1)\n    at bar\n\nNode.js v22.1.0\n";
        assert_eq!(last_meaningful_line(trace).as_deref(), Some("Error: boom"));
        let dump = "file:///x/fetch.js:29\n  throw new StatusCodeError(url);\n  ^\n\nStatusCodeError: Url: http://h/m.gguf, Status code: 404\n    at f (x.js:1)\n  url: 'http://h/m.gguf',\n  statusCode: 404,\n  responseHeaders: undefined\n}\n\nNode.js v22.23.5\n";
        assert_eq!(last_meaningful_line(dump).as_deref(), Some("StatusCodeError: Url: http://h/m.gguf, Status code: 404"));
        assert_eq!(last_meaningful_line("just a line\n").as_deref(), Some("just a line"));
    }
}
