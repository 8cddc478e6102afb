//! Speed: cold index (time, peak memory), no-change re-index, one whole-process search, in-process search
//! latency, on N generated daily notes. Targets for 2000 notes on a 2-core machine are printed beside the
//! figures, with the reference system's (OpenClaw) for the ratio.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use memory_builtin::BuiltinFactory;
use memory_core::registry::OpenContext;
use memory_core::{Config, MemoryBackend, SearchRequest};

use crate::corpus;

/// (figure, target, reference) for 2000 notes.
const REF_COLD_INDEX_S: f64 = 51.7;
const REF_PEAK_MB: f64 = 951.0;
const REF_REINDEX_S: f64 = 8.3;
const REF_CLI_SEARCH_S: f64 = 7.1;
const REF_INPROC_MS: f64 = 18.9;

struct ChildRun {
    wall: Duration,
    /// User + system CPU time: steadier than wall time on a busy machine.
    cpu: Duration,
    max_rss_kb: i64,
    stdout: String,
}

/// Run a command, returning its wall time and peak resident memory (from wait4's rusage).
fn run_measured(cmd: &mut Command) -> anyhow::Result<ChildRun> {
    use std::io::Read;
    cmd.stdout(std::process::Stdio::piped()).stderr(std::process::Stdio::piped());
    let start = Instant::now();
    let mut child = cmd.spawn().context("cannot start the memory binary")?;
    let mut out = String::new();
    child.stdout.take().unwrap().read_to_string(&mut out)?;
    let mut err = String::new();
    child.stderr.take().unwrap().read_to_string(&mut err)?;
    let pid = child.id() as libc::pid_t;
    let mut status = 0;
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let r = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    let wall = start.elapsed();
    if r < 0 {
        bail!("wait4 failed: {}", std::io::Error::last_os_error());
    }
    if !(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0) {
        bail!("memory exited with status {status}: {err}");
    }
    let tv = |t: libc::timeval| Duration::from_secs(t.tv_sec as u64) + Duration::from_micros(t.tv_usec as u64);
    Ok(ChildRun { wall, cpu: tv(usage.ru_utime) + tv(usage.ru_stime), max_rss_kb: usage.ru_maxrss, stdout: out })
}

fn memory_cmd(bin: &Path, ws: &Path, state: &Path) -> Command {
    let mut c = Command::new(bin);
    c.arg("--workspace").arg(ws).arg("--state-dir").arg(state).env("RUST_LOG", "error");
    c
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let idx = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[idx]
}

/// The median wall-clock and CPU times (seconds) of one measured run per item.
fn median_times<T>(items: impl IntoIterator<Item = T>, mut run: impl FnMut(T) -> anyhow::Result<ChildRun>) -> anyhow::Result<(f64, f64)> {
    let (mut wall, mut cpu) = (Vec::new(), Vec::new());
    for item in items {
        let r = run(item)?;
        wall.push(r.wall.as_secs_f64());
        cpu.push(r.cpu.as_secs_f64());
    }
    wall.sort_by(f64::total_cmp);
    cpu.sort_by(f64::total_cmp);
    Ok((percentile(&wall, 0.5), percentile(&cpu, 0.5)))
}

fn row(name: &str, value: String, target: &str, reference: f64, ours: f64, unit: &str) {
    let ratio = if ours > 0.0 { reference / ours } else { f64::INFINITY };
    println!("{name:<34} {value:>12}   target {target:<10} reference {reference:>8.1} {unit:<3} ({ratio:.0}x better)");
}

pub async fn run(notes: usize, memory_bin: Option<PathBuf>, searches: usize, seed: u64) -> anyhow::Result<()> {
    let bin = match memory_bin {
        Some(b) => b,
        None => std::env::current_exe()?.with_file_name("memory"),
    };
    if !bin.exists() {
        bail!("{} not found: build it with `cargo build --release -p memory-cli` or pass --memory-bin", bin.display());
    }
    let dir = tempfile::tempdir()?;
    let ws = dir.path().join("workspace");
    let state = dir.path().join("state");
    std::fs::create_dir_all(&ws)?;
    corpus::generate(&ws, notes, seed)?;
    let bytes: u64 = std::fs::read_dir(ws.join("memory"))?.flatten().map(|e| e.metadata().map_or(0, |m| m.len())).sum();
    println!("memory-bench speed: {notes} daily notes ({:.1} MB) + MEMORY.md, binary {}", bytes as f64 / 1e6, bin.display());
    println!();
    // Notes as a user has them were written before they are indexed: let the file times settle. Content read
    // within 2 s of its mtime is recorded as unsettled and read again by the next syncs until it settles, so a
    // re-index moments after generating the corpus measured that re-check of every file, not a no-change sync.
    std::thread::sleep(std::time::Duration::from_millis(2100));

    let cold = run_measured(memory_cmd(&bin, &ws, &state).args(["index", "--json"]))?;
    let report: serde_json::Value = serde_json::from_str(&cold.stdout)?;
    let chunks = report["chunksWritten"].as_u64().unwrap_or(0);
    let cold_s = cold.wall.as_secs_f64();
    let peak_mb = cold.max_rss_kb as f64 / 1024.0;
    row("cold index (whole process)", format!("{cold_s:.3} s"), "<= 0.5 s", REF_COLD_INDEX_S, cold_s, "s");
    println!("{:<34} {:>12}", "  cpu time (user + sys)", format!("{:.3} s", cold.cpu.as_secs_f64()));
    row("cold index peak memory", format!("{peak_mb:.1} MB"), "<= 40 MB", REF_PEAK_MB, peak_mb, "MB");
    println!("{:<34} {:>12}", "chunks indexed", chunks);

    let (re, re_cpu) = median_times(0..5, |_| run_measured(memory_cmd(&bin, &ws, &state).arg("index")))?;
    row("no-change re-index (median of 5)", format!("{:.1} ms", re * 1e3), "<= 30 ms", REF_REINDEX_S, re, "s");
    println!("{:<34} {:>12}", "  cpu time (user + sys)", format!("{:.1} ms", re_cpu * 1e3));

    let queries = corpus::queries(searches.max(1), seed);
    let (cli_med, cli_cpu) =
        median_times(queries.iter().take(21), |q| run_measured(memory_cmd(&bin, &ws, &state).args(["search", q.as_str(), "--json"])))?;
    row("whole-process search (median of 21)", format!("{:.1} ms", cli_med * 1e3), "<= 15 ms", REF_CLI_SEARCH_S, cli_med, "s");
    println!("{:<34} {:>12}", "  cpu time (user + sys)", format!("{:.1} ms", cli_cpu * 1e3));

    // In-process: the same engine the binary opens, on the same index.
    let ctx = OpenContext::new(Arc::new(Config::default()), std::fs::canonicalize(&ws)?, state.clone(), "main");
    let engine = BuiltinFactory.open_indexed(ctx).await?;
    for q in queries.iter().take(50) {
        engine.search(&SearchRequest::new(q.as_str())).await?; // warm-up
    }
    let mut lat = Vec::with_capacity(queries.len());
    let mut hits = 0usize;
    for q in &queries {
        let t = Instant::now();
        let r = engine.search(&SearchRequest::new(q.as_str())).await?;
        lat.push(t.elapsed().as_secs_f64() * 1e3);
        hits += r.results.len();
    }
    lat.sort_by(f64::total_cmp);
    let med = percentile(&lat, 0.5);
    row("in-process keyword search median", format!("{med:.3} ms"), "<= 0.5 ms", REF_INPROC_MS, med, "ms");
    println!("{:<34} {:>12}", "in-process search p99", format!("{:.3} ms", percentile(&lat, 0.99)));
    println!("{:<34} {:>12}", "results per query (mean)", format!("{:.2}", hits as f64 / queries.len() as f64));
    engine.close().await?;
    Ok(())
}
