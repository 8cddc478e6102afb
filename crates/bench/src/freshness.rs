//! Freshness: what the check before each search costs (issue 18). One-shot `memory search` on N generated notes,
//! side by side in one run: with the check (`sync.onSearch: true`, the default) and without it (`onSearch:
//! false`, which is how searches ran before the check existed), nothing changed and one note changed before
//! each search; then, in one `memory serve` session, a search right after a file was written and one with nothing
//! changed since.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};

use crate::corpus;

fn median_ms(mut v: Vec<Duration>) -> f64 {
    v.sort();
    v[v.len() / 2].as_secs_f64() * 1000.0
}

fn p(mut v: Vec<Duration>, q: f64) -> f64 {
    v.sort();
    v[((v.len() - 1) as f64 * q).round() as usize].as_secs_f64() * 1000.0
}

fn memory(bin: &Path, ws: &Path, state: &Path, config: &Path) -> Command {
    let mut c = Command::new(bin);
    c.arg("--workspace").arg(ws).arg("--state-dir").arg(state).arg("--config").arg(config).env("RUST_LOG", "error");
    c.env("OPENCLAW_STATE_DIR", state.join("no-openclaw"));
    c
}

fn timed(cmd: &mut Command) -> anyhow::Result<Duration> {
    let t = Instant::now();
    let o = cmd.stdout(Stdio::null()).stderr(Stdio::piped()).output()?;
    let d = t.elapsed();
    if !o.status.success() {
        bail!("memory failed: {}", String::from_utf8_lossy(&o.stderr));
    }
    Ok(d)
}

/// A note that changes before each search: appended to, so its size moves.
fn touch_note(ws: &Path, i: usize) -> anyhow::Result<()> {
    let p = ws.join("memory/freshness-probe.md");
    let mut f = std::fs::OpenOptions::new().create(true).append(true).open(&p)?;
    writeln!(f, "- probe line {i}: zephyr{i}")?;
    Ok(())
}

pub fn run(sizes: &[usize], runs: usize, memory_bin: Option<PathBuf>, seed: u64) -> anyhow::Result<()> {
    let bin = match memory_bin {
        Some(b) => b,
        None => std::env::current_exe()?.with_file_name("memory"),
    };
    println!("freshness check: one-shot `memory search` (median of {runs} runs, whole process), keyword-only builtin");
    println!(
        "{:>7}  {:>16} {:>16} {:>8}  {:>16} {:>22} {:>22}",
        "notes", "unchanged, check", "unchanged, off", "cost", "1 changed, check", "serve after write", "serve unchanged"
    );
    for &n in sizes {
        let dir = tempfile::tempdir()?;
        let ws = dir.path().join("ws");
        let state = dir.path().join("state");
        std::fs::create_dir_all(&ws)?;
        corpus::generate(&ws, n, seed)?;
        // A workspace's notes were written before it was indexed: let the file times settle (content read within
        // 2 s of its mtime is re-checked by every search until a sync records it as settled).
        std::thread::sleep(Duration::from_millis(2100));
        let on = dir.path().join("on.json5");
        let off = dir.path().join("off.json5");
        std::fs::write(&on, "{ memory: { search: { sync: { onSearch: true } } } }")?;
        std::fs::write(&off, "{ memory: { search: { sync: { onSearch: false } } } }")?;
        timed(memory(&bin, &ws, &state, &on).arg("index")).context("index")?;
        let query = "deployment checklist";
        let mut with = Vec::new();
        let mut without = Vec::new();
        // Interleaved, so both see the same machine load.
        for _ in 0..runs {
            with.push(timed(memory(&bin, &ws, &state, &on).args(["search", query]))?);
            without.push(timed(memory(&bin, &ws, &state, &off).args(["search", query]))?);
        }
        let mut changed = Vec::new();
        for i in 0..runs {
            touch_note(&ws, i)?;
            // The size moved: found without waiting for the settle window.
            changed.push(timed(memory(&bin, &ws, &state, &on).args(["search", &format!("zephyr{i}")]))?);
        }
        let (serve, serve_quiet) = serve_searches(&bin, &ws, &state, &on, runs)?;
        let (w, o) = (median_ms(with), median_ms(without));
        println!(
            "{n:>7}  {:>13.1} ms {:>13.1} ms {:>5.1} ms  {:>13.1} ms {:>9.1} ms p50 ({:.1} p90) {:>9.2} ms p50 ({:.2} p90)",
            w,
            o,
            w - o,
            median_ms(changed),
            p(serve.clone(), 0.5),
            p(serve, 0.9),
            p(serve_quiet.clone(), 0.5),
            p(serve_quiet, 0.9)
        );
    }
    Ok(())
}

/// `memory_search` through `memory serve` (MCP over stdio, watcher on): right after a note was written, and
/// once more with nothing changed since (the change journal's case). Times include the MCP round trip.
fn serve_searches(bin: &Path, ws: &Path, state: &Path, config: &Path, runs: usize) -> anyhow::Result<(Vec<Duration>, Vec<Duration>)> {
    let mut session = crate::mcp::Session::start(memory(bin, ws, state, config).arg("serve"))?;
    let mut out = Vec::new();
    let mut quiet = Vec::new();
    for i in 0..runs {
        let note = ws.join(format!("memory/serve-probe-{i}.md"));
        std::fs::write(&note, format!("A fresh fact: quokka{i} lives here.\n"))?;
        let t = Instant::now();
        let text = session.search(&format!("quokka{i}"))?;
        out.push(t.elapsed());
        if !text.contains(&format!("serve-probe-{i}.md")) {
            bail!("memory_search did not find the note written just before: {text}");
        }
        let t = Instant::now();
        let text = session.search(&format!("quokka{i}"))?;
        quiet.push(t.elapsed());
        if !text.contains(&format!("serve-probe-{i}.md")) {
            bail!("a second memory_search lost the note: {text}");
        }
    }
    Ok((out, quiet))
}
