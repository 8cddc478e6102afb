//! `memory-bench compare`: memory-rs, QMD and OpenClaw side by side on the same generated corpora and the
//! Cranfield collection, in one run on one machine, so every ratio compares figures taken minutes apart.
//! Writes results.json, the charts and compare.md (see `report`).

mod charts;
pub(crate) mod process;
mod report;
mod tools;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context};
use serde::{Deserialize, Serialize};

use crate::corpus;
use crate::quality;
pub use process::Cost;
use tools::{NodeProgram, Tool};

/// A figure, or why there is none ("did not finish in 10 min", "n/a: ...").
pub type Fig<T> = Result<T, String>;

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SpeedRow {
    pub engine: String,
    pub mode: String,
    pub notes: usize,
    pub chunks: Option<u64>,
    pub cold: Fig<Cost>,
    pub noop: Fig<Cost>,
    pub touched: Fig<Cost>,
    /// Median over `cli_searches` whole-process searches.
    pub cli_search: Fig<Cost>,
    pub cli_searches: usize,
    pub inproc_p50_ms: Fig<f64>,
    pub inproc_p99_ms: Fig<f64>,
    pub inproc_queries: usize,
    pub index_mb: Fig<f64>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct QualityRow {
    pub engine: String,
    pub mode: String,
    pub scores: Fig<quality::Scores>,
    pub note: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Results {
    pub date: String,
    pub machine: Machine,
    pub command: String,
    pub versions: Vec<(String, String)>,
    pub timeout_min: f64,
    pub speed: Vec<SpeedRow>,
    pub quality: Vec<QualityRow>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Machine {
    pub cpu: String,
    pub cores: usize,
    pub memory_gb: f64,
    pub load_start: String,
    pub load_end: String,
    pub os: String,
}

pub struct Options {
    pub sizes: Vec<usize>,
    pub hybrid_sizes: Vec<usize>,
    pub tools: Vec<String>,
    pub timeout: Duration,
    pub quality: bool,
    pub dataset: PathBuf,
    pub model: Option<PathBuf>,
    pub memory_bin: Option<PathBuf>,
    pub out: PathBuf,
    pub seed: u64,
    pub user_folder: Option<PathBuf>,
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg").map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" ")).unwrap_or_default()
}

fn machine(load_start: String) -> Machine {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let cpu = cpuinfo
        .lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split(':').nth(1))
        .map_or_else(|| "unknown".into(), |s| s.trim().to_string());
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let kb: f64 =
        meminfo.lines().find(|l| l.starts_with("MemTotal")).and_then(|l| l.split_whitespace().nth(1)).and_then(|v| v.parse().ok()).unwrap_or(0.0);
    let os = std::fs::read_to_string("/etc/os-release")
        .ok()
        .and_then(|s| s.lines().find(|l| l.starts_with("PRETTY_NAME=")).map(|l| l[12..].trim_matches('"').to_string()))
        .unwrap_or_default();
    Machine {
        cpu,
        cores: std::thread::available_parallelism().map_or(1, std::num::NonZero::get),
        memory_gb: kb / 1024.0 / 1024.0,
        load_start,
        load_end: load_average(),
        os,
    }
}

/// (tool, version string) for the report.
type Versions = Vec<(String, String)>;

/// The reference tools, from the environment the setup scripts print, else their default cache places.
fn find_tools(opts: &Options) -> anyhow::Result<(Vec<Tool>, Versions)> {
    let mut tools = Vec::new();
    let mut versions = Vec::new();
    let want = |name: &str| opts.tools.iter().any(|t| t == name);
    let bench = std::env::current_exe()?;
    if want("memory") {
        let bin = opts.memory_bin.clone().unwrap_or_else(|| bench.with_file_name("memory"));
        if !bin.exists() {
            bail!("{} not found: build it with `cargo build --release -p memory-cli` or pass --memory-bin", bin.display());
        }
        let v = std::process::Command::new(&bin).arg("--version").output()?;
        versions.push(("memory-rs".into(), String::from_utf8_lossy(&v.stdout).trim().to_string()));
        tools.push(Tool::Memory { bin: bin.clone() });
        tools.push(Tool::MemoryServer { bin });
        tools.push(Tool::MemoryHybrid { bench: bench.clone() });
    }
    let cache = std::env::var_os("HOME").map(PathBuf::from).unwrap_or_default().join(".cache/memory-rs");
    if want("qmd") {
        let inv = memory_qmd::locate::resolve(None).context("QMD not found (run scripts/setup.sh)")?;
        let entry = inv.pre_args.first().map(PathBuf::from).context("qmd is not a JS entry")?;
        let p = NodeProgram { node: inv.program, entry };
        versions.push(("QMD".into(), node_version(&p, &["--version"])));
        tools.push(Tool::Qmd(p));
    }
    if want("openclaw") {
        let node = std::env::var_os("OPENCLAW_NODE").map_or_else(|| cache.join("bench/node24/bin/node"), PathBuf::from);
        let entry = std::env::var_os("OPENCLAW_ENTRY").map_or_else(|| cache.join("bench/openclaw/node_modules/openclaw/openclaw.mjs"), PathBuf::from);
        if !node.exists() || !entry.exists() {
            bail!("OpenClaw not found at {} / {}: run scripts/bench/setup-openclaw.sh", node.display(), entry.display());
        }
        let driver = std::env::var_os("OPENCLAW_DRIVER")
            .map_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../scripts/bench/openclaw-search.mjs"), PathBuf::from);
        let p = NodeProgram { node, entry };
        versions.push(("OpenClaw".into(), node_version(&p, &["--version"])));
        tools.push(Tool::OpenClaw { program: p, driver });
    }
    Ok((tools, versions))
}

fn node_version(p: &NodeProgram, args: &[&str]) -> String {
    let tmp = tempfile::tempdir().ok();
    let mut c = std::process::Command::new(&p.node);
    c.arg(&p.entry).args(args).env_remove("CI");
    if let Some(t) = &tmp {
        c.env("HOME", t.path()).env("OPENCLAW_STATE_DIR", t.path().join("state")).env("XDG_CACHE_HOME", t.path()).env("XDG_CONFIG_HOME", t.path());
    }
    let v = c.output().map(|o| String::from_utf8_lossy(&o.stdout).lines().next().unwrap_or("").trim().to_string()).unwrap_or_default();
    let n = std::process::Command::new(&p.node)
        .arg("--version")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default();
    format!("{v} (Node {n})")
}

/// Append a line to every 100th daily note (1%): a content change every engine must pick up.
fn touch_one_percent(ws: &Path, tag: &str) -> std::io::Result<usize> {
    let mut names: Vec<PathBuf> = std::fs::read_dir(ws.join("memory"))?.flatten().map(|e| e.path()).filter(|p| p.is_file()).collect();
    names.sort();
    let mut n = 0;
    for p in names.iter().step_by(100) {
        use std::io::Write;
        std::fs::OpenOptions::new().append(true).open(p)?.write_all(format!("- touched by the benchmark ({tag})\n").as_bytes())?;
        n += 1;
    }
    Ok(n)
}

/// MEMORY.md and memory/** (Markdown only, links skipped) from a user's workspace into `to`.
fn copy_memory_files(from: &Path, to: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(to.join("memory"))?;
    if from.join("MEMORY.md").is_file() {
        std::fs::copy(from.join("MEMORY.md"), to.join("MEMORY.md"))?;
    }
    let mut stack = vec![PathBuf::from("memory")];
    while let Some(rel) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(from.join(&rel)) else { continue };
        for e in entries.flatten() {
            let meta = e.path().symlink_metadata()?;
            let r = rel.join(e.file_name());
            if meta.is_dir() {
                std::fs::create_dir_all(to.join(&r))?;
                stack.push(r);
            } else if meta.is_file() && r.extension().is_some_and(|x| x == "md") {
                std::fs::copy(e.path(), to.join(&r))?;
            }
        }
    }
    Ok(())
}

fn median_cost(mut runs: Vec<Cost>) -> Cost {
    runs.sort_by(|a, b| a.wall_s.total_cmp(&b.wall_s));
    let mid = runs[runs.len() / 2];
    let mut cpu: Vec<f64> = runs.iter().map(|c| c.cpu_s).collect();
    cpu.sort_by(f64::total_cmp);
    Cost { wall_s: mid.wall_s, cpu_s: cpu[cpu.len() / 2], peak_mb: runs.iter().map(|c| c.peak_mb).fold(0.0, f64::max) }
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

/// How many whole-process searches and in-process queries to time per tool (the reference tools take seconds
/// per process; the deadline bounds them anyway).
fn search_counts(tool: &Tool) -> (usize, usize, usize) {
    match tool {
        Tool::Memory { .. } | Tool::MemoryServer { .. } => (21, 2000, 50),
        Tool::MemoryHybrid { .. } => (11, 500, 20),
        Tool::Qmd(_) => (11, 0, 0),
        Tool::OpenClaw { .. } => (5, 100, 10),
    }
}

/// One JSON line per query from an in-process driver: (query, ms, ranked stems).
fn parse_lines(stdout: &str) -> Fig<Vec<(String, f64, Vec<String>)>> {
    stdout
        .lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).map_err(|e| format!("unparsable driver output: {e}"))?;
            let stems = v["paths"].as_array().map(|a| a.iter().filter_map(|h| h["path"].as_str()).map(tools::stem).collect()).unwrap_or_default();
            Ok((v["query"].as_str().unwrap_or("").to_string(), v["ms"].as_f64().unwrap_or(f64::NAN), stems))
        })
        .collect()
}

fn log(msg: impl AsRef<str>) {
    eprintln!("[{}] {}", chrono::Utc::now().format("%H:%M:%S"), msg.as_ref());
}

fn bench_tool(tool: &Tool, root: &Path, ws: &Path, notes: usize, queries: &[String], limit: Duration) -> anyhow::Result<SpeedRow> {
    let home = tool.home(root, notes);
    let _ = std::fs::remove_dir_all(&home);
    tool.prepare(&home, ws)?;
    let label = tool.label();
    let mut row = SpeedRow {
        engine: tool.engine().into(),
        mode: tool.mode().into(),
        notes,
        chunks: None,
        cold: Err(String::new()),
        noop: Err("skipped: no index".into()),
        touched: Err("skipped: no index".into()),
        cli_search: Err("skipped: no index".into()),
        cli_searches: 0,
        inproc_p50_ms: Err("skipped: no index".into()),
        inproc_p99_ms: Err("skipped: no index".into()),
        inproc_queries: 0,
        index_mb: Err("skipped: no index".into()),
    };
    log(format!("{label} @ {notes}: cold index"));
    let cold = process::run(&mut tool.cold_index(&home, ws), None, limit);
    row.cold = cold.as_ref().map(|f| f.cost).map_err(Clone::clone);
    let Ok(cold) = cold else {
        log(format!("  {}", row.cold.as_ref().unwrap_err()));
        let _ = std::fs::remove_dir_all(&home);
        return Ok(row);
    };
    if let Ok(v) = serde_json::from_str::<serde_json::Value>(cold.stdout.trim()) {
        row.chunks = v["chunksWritten"].as_u64();
    }
    log(format!("  {:.2} s wall, {:.2} s cpu, {:.0} MB", cold.cost.wall_s, cold.cost.cpu_s, cold.cost.peak_mb));
    row.index_mb = Ok(process::folder_bytes(&tool.index_dir(&home)) as f64 / 1e6);

    // No-change re-index: a median of 3 when each run is quick.
    let mut noop = Vec::new();
    for _ in 0..3 {
        match process::run(&mut tool.reindex(&home, ws), None, limit) {
            Ok(f) => noop.push(f.cost),
            Err(e) => {
                row.noop = Err(e);
                break;
            }
        }
        if noop.last().is_some_and(|c| c.wall_s > 2.0) {
            break;
        }
    }
    if !noop.is_empty() {
        row.noop = Ok(median_cost(noop));
    }
    log(format!("  no-change re-index: {:?}", row.noop.as_ref().map(|c| c.wall_s)));

    let touched = touch_one_percent(ws, &label)?;
    row.touched = process::run(&mut tool.reindex(&home, ws), None, limit).map(|f| f.cost);
    log(format!("  re-index after touching {touched} files: {:?}", row.touched.as_ref().map(|c| c.wall_s)));

    let (cli_n, inproc_n, warmup) = search_counts(tool);
    let mut stop = None;
    if let Some((mut start, then)) = tool.around_searches(&home, ws) {
        process::run(&mut start, None, limit).map_err(|e| anyhow::anyhow!("{label}: server start: {e}"))?;
        stop = Some(then);
    }
    let mut cli = Vec::new();
    let started = std::time::Instant::now();
    for q in queries.iter().take(cli_n) {
        let remaining = limit.saturating_sub(started.elapsed());
        if remaining.is_zero() {
            break;
        }
        match process::run(&mut tool.search(&home, ws, q, 6), None, remaining) {
            Ok(f) => {
                tool.parse_cli_hits(&f.stdout).map_err(|e| anyhow::anyhow!("{label} search output: {e}"))?;
                cli.push(f.cost);
            }
            Err(e) => {
                row.cli_search = Err(e);
                break;
            }
        }
    }
    row.cli_searches = cli.len();
    if !cli.is_empty() {
        row.cli_search = Ok(median_cost(cli));
    }
    log(format!("  whole-process search ({}): {:?}", row.cli_searches, row.cli_search.as_ref().map(|c| c.wall_s)));
    if let Some(mut stop) = stop {
        process::run(&mut stop, None, limit).map_err(|e| anyhow::anyhow!("{label}: server stop: {e}"))?;
    }

    match tool.in_process(&home, ws, 6) {
        None => {
            row.inproc_p50_ms = Err("n/a: no in-process entry point".into());
            row.inproc_p99_ms = row.inproc_p50_ms.clone();
        }
        Some(mut cmd) => {
            let input: String = queries.iter().cycle().take(warmup + inproc_n).map(|q| format!("{}\n", q.replace('\n', " "))).collect();
            match process::run(&mut cmd, Some(input), limit).and_then(|f| parse_lines(&f.stdout)) {
                Ok(lines) => {
                    let mut ms: Vec<f64> = lines.iter().skip(warmup).map(|l| l.1).collect();
                    ms.sort_by(f64::total_cmp);
                    if ms.is_empty() {
                        row.inproc_p50_ms = Err("no queries answered".into());
                        row.inproc_p99_ms = row.inproc_p50_ms.clone();
                    } else {
                        row.inproc_queries = ms.len();
                        row.inproc_p50_ms = Ok(percentile(&ms, 0.5));
                        row.inproc_p99_ms = Ok(percentile(&ms, 0.99));
                    }
                }
                Err(e) => {
                    row.inproc_p50_ms = Err(e.clone());
                    row.inproc_p99_ms = Err(e);
                }
            }
        }
    }
    log(format!("  in-process p50 {:?} p99 {:?}", row.inproc_p50_ms, row.inproc_p99_ms));
    let _ = std::fs::remove_dir_all(&home);
    Ok(row)
}

/// Cranfield dev for every engine and mode: memory-rs in-process (real local model for vector and hybrid),
/// QMD and OpenClaw through their own search paths with 100 results per query.
async fn quality_rows(opts: &Options, tools: &[Tool], root: &Path) -> anyhow::Result<Vec<QualityRow>> {
    let data = quality::load(&opts.dataset)?;
    let ws = root.join("cranfield/ws");
    data.write_workspace(&ws)?;
    let mut rows = Vec::new();
    let model_note = opts.model.as_ref().map(|m| format!("local model {}", m.file_name().unwrap_or_default().to_string_lossy()));
    if tools.iter().any(|t| matches!(t, Tool::Memory { .. })) {
        log("quality: memory-rs (in-process)");
        for (mode, s) in quality::builtin_scores(&data, &ws, &root.join("cranfield/memory-state"), false, opts.model.as_deref(), &[]).await? {
            let note = if mode == "keyword" { String::new() } else { model_note.clone().unwrap_or_default() };
            rows.push(QualityRow { engine: "memory-rs".into(), mode, scores: Ok(s), note });
        }
        if opts.model.is_none() {
            rows.push(QualityRow {
                engine: "memory-rs".into(),
                mode: "hybrid".into(),
                scores: Err("no local model (run scripts/setup.sh or pass --model)".into()),
                note: String::new(),
            });
        }
    }
    let queries: Vec<(String, String)> = data.judged_queries().map(|q| (q.id.clone(), q.text.replace('\n', " "))).collect();
    for tool in tools.iter().filter(|t| matches!(t, Tool::Qmd(_) | Tool::OpenClaw { .. })) {
        log(format!("quality: {}", tool.label()));
        let home = tool.home(root, 0).with_extension("cranfield");
        let _ = std::fs::remove_dir_all(&home);
        tool.prepare(&home, &ws)?;
        let scores = (|| -> Fig<quality::Scores> {
            process::run(&mut tool.cold_index(&home, &ws), None, opts.timeout)?;
            let mut ranked: HashMap<String, Vec<String>> = HashMap::new();
            match tool.in_process(&home, &ws, 100) {
                Some(mut cmd) => {
                    let input: String = queries.iter().map(|(_, t)| format!("{t}\n")).collect();
                    let lines = parse_lines(&process::run(&mut cmd, Some(input), opts.timeout)?.stdout)?;
                    if lines.len() != queries.len() {
                        return Err(format!("answered {} of {} queries", lines.len(), queries.len()));
                    }
                    for ((id, _), (_, _, stems)) in queries.iter().zip(lines) {
                        ranked.insert(id.clone(), quality::dedup_stems(stems));
                    }
                }
                None => {
                    let started = std::time::Instant::now();
                    for (id, text) in &queries {
                        let remaining = opts.timeout.saturating_sub(started.elapsed());
                        if remaining.is_zero() {
                            return Err(process::timeout_note(opts.timeout));
                        }
                        let f = process::run(&mut tool.search(&home, &ws, text, 100), None, remaining)?;
                        ranked.insert(id.clone(), quality::dedup_stems(tool.parse_cli_hits(&f.stdout)?));
                    }
                }
            }
            Ok(quality::score_rankings(&data, &ranked))
        })();
        log(format!("  {scores:?}"));
        let note = match tool {
            Tool::Qmd(_) => "`qmd search` (BM25)".into(),
            _ => "`provider: none` (FTS only)".into(),
        };
        rows.push(QualityRow { engine: tool.engine().into(), mode: tool.mode().into(), scores, note });
        let _ = std::fs::remove_dir_all(&home);
    }
    for (engine, why) in [
        ("QMD", "`qmd query`/`vsearch` need GGUF models downloaded from Hugging Face, unreachable here"),
        ("OpenClaw", "its embedding providers need an API key or a model download, unavailable here"),
    ] {
        if tools.iter().any(|t| t.engine() == engine) {
            rows.push(QualityRow { engine: engine.into(), mode: "hybrid".into(), scores: Err(format!("n/a: {why}")), note: String::new() });
        }
    }
    Ok(rows)
}

pub async fn run(opts: Options, command_line: String) -> anyhow::Result<()> {
    let load_start = load_average();
    let (tools, versions) = find_tools(&opts)?;
    log(format!("tools: {versions:?}; load {load_start}"));
    let tmp = tempfile::Builder::new().prefix("memory-bench-").tempdir()?;
    let root = tmp.path();
    let mut speed = Vec::new();
    let mut all_sizes: Vec<usize> = opts.sizes.iter().chain(&opts.hybrid_sizes).copied().collect();
    all_sizes.sort_unstable();
    all_sizes.dedup();
    // A tool whose cold index did not finish at one size is not started on a larger one.
    let mut gave_up: HashMap<String, String> = HashMap::new();
    // The last cold index each tool finished: (notes, seconds), to skip a size it cannot finish in time.
    let mut last_cold: HashMap<String, (usize, f64)> = HashMap::new();
    let queries = corpus::queries(2000, opts.seed);
    let mut corpora: Vec<(usize, Option<PathBuf>)> = all_sizes.iter().map(|n| (*n, None)).collect();
    if let Some(folder) = &opts.user_folder {
        // A copy: the 1% step appends to files, and a user's notes are never written to.
        let copy = root.join("user-folder");
        copy_memory_files(folder, &copy)?;
        let n = std::fs::read_dir(copy.join("memory")).map_or(0, std::iter::Iterator::count);
        corpora.push((n, Some(copy)));
    }
    for (notes, user) in corpora {
        let ws = match &user {
            Some(f) => f.clone(),
            None => {
                let ws = root.join(format!("corpus-{notes}"));
                log(format!("generating {notes} notes (seed {})", opts.seed));
                corpus::generate(&ws, notes, opts.seed)?;
                ws
            }
        };
        // A workspace's notes were written before it is indexed: let the file times settle (memory-rs re-reads
        // content read within 2 s of its mtime on every search until a sync records it as settled, which would
        // time a re-read of every note instead of the search).
        std::thread::sleep(std::time::Duration::from_millis(2100));
        for tool in &tools {
            let in_list = match tool {
                Tool::MemoryHybrid { .. } => opts.hybrid_sizes.contains(&notes),
                Tool::Memory { .. } | Tool::MemoryServer { .. } => true,
                _ => opts.sizes.contains(&notes) || user.is_some(),
            };
            if !in_list {
                continue;
            }
            let label = tool.label();
            let projected = last_cold.get(&label).and_then(|(n0, s0)| {
                let est = s0 * notes as f64 / *n0 as f64;
                (est > opts.timeout.as_secs_f64()).then(|| {
                    format!(
                        "not run: cold index took {s0:.0} s at {n0} notes, {:.0} min projected here (deadline {:.0} min)",
                        est / 60.0,
                        opts.timeout.as_secs_f64() / 60.0
                    )
                })
            });
            if let Some(why) = gave_up.get(&label).cloned().or(projected) {
                log(format!("{label} @ {notes}: {why}"));
                speed.push(SpeedRow {
                    engine: tool.engine().into(),
                    mode: tool.mode().into(),
                    notes,
                    chunks: None,
                    cold: Err(why.clone()),
                    noop: Err(why.clone()),
                    touched: Err(why.clone()),
                    cli_search: Err(why.clone()),
                    cli_searches: 0,
                    inproc_p50_ms: Err(why.clone()),
                    inproc_p99_ms: Err(why.clone()),
                    inproc_queries: 0,
                    index_mb: Err(why),
                });
                continue;
            }
            let row = bench_tool(tool, root, &ws, notes, &queries, opts.timeout)?;
            match &row.cold {
                Ok(c) => {
                    last_cold.insert(label, (notes, c.wall_s));
                }
                Err(_) => {
                    gave_up.insert(label, format!("not run: cold index did not finish at {notes} notes"));
                }
            }
            speed.push(row);
            // Kept as the run goes: an interrupted run still leaves its figures.
            let partial = opts.out.join("bench/results.partial.json");
            if std::fs::create_dir_all(opts.out.join("bench")).is_ok() {
                if let Err(e) = std::fs::write(&partial, serde_json::to_string_pretty(&speed)?) {
                    log(format!("cannot write {}: {e}", partial.display()));
                }
            }
        }
        let _ = std::fs::remove_dir_all(&ws);
    }
    let quality = if opts.quality { quality_rows(&opts, &tools, root).await? } else { Vec::new() };
    let results = Results {
        date: chrono::Utc::now().format("%Y-%m-%d %H:%M UTC").to_string(),
        machine: machine(load_start),
        command: command_line,
        versions,
        timeout_min: opts.timeout.as_secs_f64() / 60.0,
        speed,
        quality,
    };
    write_outputs(&results, &opts.out)
}

/// results.json, the charts and compare.md under `out` (`out/bench/...`, `out/compare.md`).
pub fn write_outputs(results: &Results, out: &Path) -> anyhow::Result<()> {
    let bench_dir = out.join("bench");
    std::fs::create_dir_all(&bench_dir)?;
    std::fs::write(bench_dir.join("results.json"), serde_json::to_string_pretty(results)?)?;
    let _ = std::fs::remove_file(bench_dir.join("results.partial.json"));
    let charts = charts::draw_all(results, &bench_dir)?;
    let md = report::markdown(results, &charts);
    std::fs::write(out.join("compare.md"), &md)?;
    println!("{md}");
    log(format!("wrote {}", out.join("compare.md").display()));
    Ok(())
}

/// Re-render the Markdown and charts from a results.json (no measurement).
pub fn rerender(results_json: &Path, out: &Path) -> anyhow::Result<()> {
    let results: Results = serde_json::from_str(&std::fs::read_to_string(results_json)?)?;
    write_outputs(&results, out)
}
