//! One-shot `memory search` with the local embedding model (issue 22): the whole process — start, open the
//! index, the freshness check, load the model, embed the query, search, print — on N generated notes, for one
//! or two `memory` binaries side by side (interleaved, so both see the same machine load), each search with a
//! query not asked before (no cache of any kind helps). The index is built once by the first binary (its
//! embedding throughput is printed: the cost of indexing with this model) and kept with `--keep DIR` for later
//! runs.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};

use crate::corpus;

fn memory(bin: &Path, ws: &Path, state: &Path, config: &Path) -> Command {
    let mut c = Command::new(bin);
    c.arg("--workspace").arg(ws).arg("--state-dir").arg(state).arg("--config").arg(config).env("RUST_LOG", "error");
    c.env("OPENCLAW_STATE_DIR", state.join("no-openclaw"));
    c
}

/// Run a `memory` command to completion (no input), timed whole; its stdout, or its stderr as the error.
pub(crate) fn run_ok(cmd: &mut Command) -> anyhow::Result<(Duration, String)> {
    let t = Instant::now();
    let o = cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()).output()?;
    let d = t.elapsed();
    if !o.status.success() {
        bail!("memory failed: {}", String::from_utf8_lossy(&o.stderr));
    }
    Ok((d, String::from_utf8_lossy(&o.stdout).into_owned()))
}

/// The `q` quantile of `v`, in milliseconds (nearest rank).
pub(crate) fn quantile_ms(v: &[Duration], q: f64) -> f64 {
    let mut v = v.to_vec();
    v.sort();
    v[((v.len() - 1) as f64 * q).round() as usize].as_secs_f64() * 1000.0
}

pub struct Options {
    pub notes: usize,
    /// Bytes per generated note (the index's embedding time grows with it; the search's hardly).
    pub note_bytes: usize,
    pub runs: usize,
    pub model: PathBuf,
    pub bins: Vec<PathBuf>,
    pub keep: Option<PathBuf>,
    pub seed: u64,
}

pub fn run(o: Options) -> anyhow::Result<()> {
    if o.bins.is_empty() {
        bail!("no `memory` binary to time");
    }
    let tmp = tempfile::tempdir()?;
    let root = o.keep.clone().unwrap_or_else(|| tmp.path().to_path_buf());
    let ws = root.join(format!("ws-{}-{}", o.notes, o.note_bytes));
    let state = root.join(format!("state-{}-{}", o.notes, o.note_bytes));
    if !ws.join("memory").is_dir() {
        std::fs::create_dir_all(&ws)?;
        corpus::generate_sized(&ws, o.notes, o.seed, o.note_bytes)?;
        // Let the file times settle (content read within 2 s of its mtime is re-checked by later searches).
        std::thread::sleep(Duration::from_millis(2100));
    }
    let config = root.join("local.json5");
    let model = std::fs::canonicalize(&o.model).with_context(|| format!("model folder {}", o.model.display()))?;
    std::fs::write(
        &config,
        format!("{{ memory: {{ search: {{ provider: \"local\", local: {{ modelPath: {:?} }} }} }} }}", model.display().to_string()),
    )?;
    let (took, out) = run_ok(memory(&o.bins[0], &ws, &state, &config).args(["index", "--json"])).context("index")?;
    let report: serde_json::Value = serde_json::from_str(out.trim()).unwrap_or_default();
    let embedded = report.get("chunksEmbedded").and_then(serde_json::Value::as_u64).unwrap_or(0);
    if embedded > 0 {
        println!(
            "indexed {} notes of ~{} bytes: {embedded} chunks embedded in {:.1} s ({:.1} chunks/s) with {}",
            o.notes,
            o.note_bytes,
            took.as_secs_f64(),
            embedded as f64 / took.as_secs_f64(),
            model.display()
        );
    }
    // Warm the page cache for every binary (the model files, the index) before timing.
    for b in &o.bins {
        run_ok(memory(b, &ws, &state, &config).args(["search", "warm up"]))?;
    }
    let queries = corpus::queries(o.runs * o.bins.len(), o.seed ^ 0xfeed);
    let mut times: Vec<Vec<Duration>> = vec![Vec::new(); o.bins.len()];
    for r in 0..o.runs {
        for (i, b) in o.bins.iter().enumerate() {
            let q = &queries[r * o.bins.len() + i];
            times[i].push(run_ok(memory(b, &ws, &state, &config).args(["search", q.as_str()]))?.0);
        }
    }
    println!(
        "one-shot `memory search` with the local model, {} notes of ~{} bytes, {} runs each (a new query every run), whole process:",
        o.notes, o.note_bytes, o.runs
    );
    for (b, t) in o.bins.iter().zip(&times) {
        println!(
            "  {:<60} p50 {:>7.1} ms  p90 {:>7.1} ms  min {:>7.1} ms",
            b.display().to_string(),
            quantile_ms(t, 0.5),
            quantile_ms(t, 0.9),
            quantile_ms(t, 0.0)
        );
    }
    Ok(())
}
