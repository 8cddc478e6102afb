//! Runs one benchmark step as a child process in its own process group: wall time, CPU time (user + system,
//! steadier than wall time on a shared machine) and peak resident memory from wait4's rusage, with a deadline
//! after which the whole group is killed (the reference tools spawn helpers of their own).

use std::io::{Read, Write};
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

/// What one measured step cost.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub struct Cost {
    pub wall_s: f64,
    pub cpu_s: f64,
    pub peak_mb: f64,
}

pub struct Finished {
    pub cost: Cost,
    pub stdout: String,
}

/// Why a step has no figure; shown as-is in the tables.
pub fn timeout_note(limit: Duration) -> String {
    format!("did not finish in {} min", (limit.as_secs_f64() / 60.0).round())
}

/// Run `cmd` (stdin fed from `input`), killing its process group after `limit`.
pub fn run(cmd: &mut Command, input: Option<String>, limit: Duration) -> Result<Finished, String> {
    cmd.stdin(if input.is_some() { Stdio::piped() } else { Stdio::null() }).stdout(Stdio::piped()).stderr(Stdio::piped()).process_group(0);
    let start = Instant::now();
    let mut child = cmd.spawn().map_err(|e| format!("cannot start {:?}: {e}", cmd.get_program()))?;
    let pid = child.id() as libc::pid_t;
    let feeder = input.map(|text| {
        let mut stdin = child.stdin.take().expect("piped stdin");
        std::thread::spawn(move || {
            // A child that exits early closes the pipe: that is its answer, not ours to report.
            let _ = stdin.write_all(text.as_bytes());
        })
    });
    let mut out_pipe = child.stdout.take().expect("piped stdout");
    let mut err_pipe = child.stderr.take().expect("piped stderr");
    let out_reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = out_pipe.read_to_string(&mut s);
        s
    });
    let err_reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = err_pipe.read_to_string(&mut s);
        s
    });
    let (done_tx, done_rx) = mpsc::channel::<()>();
    let watchdog = std::thread::spawn(move || {
        if done_rx.recv_timeout(limit).is_err() {
            unsafe { libc::kill(-pid, libc::SIGKILL) };
            return true;
        }
        false
    });
    let mut status = 0;
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let r = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    let wall = start.elapsed();
    let _ = done_tx.send(());
    let timed_out = watchdog.join().unwrap_or(false);
    // Helpers left behind by the tool (if any) go with it.
    unsafe { libc::kill(-pid, libc::SIGKILL) };
    if let Some(f) = feeder {
        let _ = f.join();
    }
    let stdout = out_reader.join().unwrap_or_default();
    let stderr = err_reader.join().unwrap_or_default();
    if r < 0 {
        return Err(format!("wait4 failed: {}", std::io::Error::last_os_error()));
    }
    if timed_out {
        return Err(timeout_note(limit));
    }
    if !(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0) {
        // The error line says why; a backtrace's last lines do not.
        let why: Vec<&str> = stderr.lines().filter(|l| l.contains("rror") || l.contains("panicked")).take(3).collect();
        let why = if why.is_empty() { stderr.lines().rev().take(5).collect::<Vec<_>>().into_iter().rev().collect() } else { why };
        return Err(format!("failed (status {status}): {}", why.join(" | ")));
    }
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    Ok(Finished {
        cost: Cost { wall_s: wall.as_secs_f64(), cpu_s: tv(usage.ru_utime) + tv(usage.ru_stime), peak_mb: usage.ru_maxrss as f64 / 1024.0 },
        stdout,
    })
}

/// Bytes under a folder (files only, links not followed).
pub fn folder_bytes(dir: &std::path::Path) -> u64 {
    let mut total = 0;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else { continue };
        for e in entries.flatten() {
            let Ok(meta) = e.path().symlink_metadata() else { continue };
            if meta.is_dir() {
                stack.push(e.path());
            } else if meta.is_file() {
                total += meta.len();
            }
        }
    }
    total
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn measures_a_child_and_kills_it_at_the_deadline() {
        let ok = run(Command::new("sh").args(["-c", "cat; echo done"]), Some("in\n".into()), Duration::from_secs(10)).unwrap();
        assert_eq!(ok.stdout, "in\ndone\n");
        assert!(ok.cost.peak_mb > 0.0);
        let slow = run(Command::new("sh").args(["-c", "sleep 5 & wait"]), None, Duration::from_millis(200));
        assert_eq!(slow.err().unwrap(), timeout_note(Duration::from_millis(200)));
        let failed = run(Command::new("sh").args(["-c", "echo boom >&2; exit 3"]), None, Duration::from_secs(10));
        assert!(failed.err().unwrap().contains("boom"));
    }
}
