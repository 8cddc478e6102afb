//! `memory-bench scale` (issue 22): the builtin engine at a power user's scale, this build side by side with
//! another build of memory-rs (`--old DIR`, holding its `memory` and `memory-bench` binaries) in one run, on
//! the same index files. Per corpus size: in-process keyword and hybrid latency (the harness of each build
//! answering the same queries), recall@10 of this build's vector search against sqlite-vec's exact scan,
//! whole-process `memory search` for common-word and rare-word queries, and, optionally, cold index and
//! no-change re-index of the keyword index by each build.
//!
//! Corpora: the generated daily notes (corpus.rs, ~2 chunks each). Queries: the usual mix (`corpus::queries`)
//! and the common-words set (`corpus::common_queries`: every word in most notes, the case that made FTS5 score
//! nearly every row).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use anyhow::{bail, Context};
use memory_builtin::{SqliteStorage, SqliteStore};
use memory_core::embedding::{EmbeddingProvider, EmbeddingPurpose};
use memory_core::store::{ChunkStore, Scope};

use crate::compare::process;
use crate::corpus;
use crate::harness::{SEEDED_DIMS, SEEDED_SEED};
use crate::seeded_embedder::seeded_embedder;

/// The command line of `memory-bench scale` (see its help).
#[derive(clap::Args)]
pub struct Options {
    /// Corpus sizes (notes, ~2 chunks each) for keyword figures.
    #[arg(long, value_delimiter = ',', default_value = "5000,20000,50000,200000")]
    pub notes: Vec<usize>,
    /// Corpus sizes for hybrid figures (seeded embedder).
    #[arg(long, value_delimiter = ',', default_value = "5000,20000,50000")]
    pub hybrid_notes: Vec<usize>,
    /// Folder with the other build's `memory` and `memory-bench` binaries.
    #[arg(long)]
    pub old: Option<PathBuf>,
    /// In-process queries per set.
    #[arg(long, default_value_t = 200)]
    pub queries: usize,
    /// One-shot `memory search` runs per figure.
    #[arg(long, default_value_t = 11)]
    pub whole_process_runs: usize,
    /// Also time each build's cold keyword index and no-change re-index.
    #[arg(long)]
    pub index_runs: bool,
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    /// Keep corpora and indexes in this folder (reused by the next run) instead of a temporary one.
    #[arg(long)]
    pub keep: Option<PathBuf>,
    /// Only generate the corpora and build the indexes (into `--keep`), measure nothing: the slow part can run
    /// while the machine is busy, the measurements later on a quiet one.
    #[arg(long, requires = "keep")]
    pub prepare_only: bool,
}

const LIMIT: Duration = Duration::from_secs(3600);

struct Build {
    name: &'static str,
    memory: PathBuf,
    bench: PathBuf,
}

fn builds(old: &Option<PathBuf>) -> anyhow::Result<Vec<Build>> {
    let here = std::env::current_exe()?;
    let mut out = vec![Build { name: "new", memory: here.with_file_name("memory"), bench: here.clone() }];
    if let Some(dir) = old {
        out.push(Build { name: "old", memory: dir.join("memory"), bench: dir.join("memory-bench") });
    }
    for b in &out {
        if !b.memory.exists() || !b.bench.exists() {
            bail!("{} build: {} or {} missing", b.name, b.memory.display(), b.bench.display());
        }
    }
    Ok(out)
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

/// In-process latencies (ms, sorted) of `queries` through a build's harness, each query's result paths, and the
/// harness's peak resident memory (MB).
fn in_process(b: &Build, mode: &str, ws: &Path, state: &Path, queries: &[String]) -> anyhow::Result<(Vec<f64>, Vec<Vec<String>>, f64)> {
    let mut cmd = Command::new(&b.bench);
    cmd.args(["harness", "--mode", mode, "--workspace"]).arg(ws).arg("--state-dir").arg(state).arg("search-stdin");
    cmd.env("RUST_LOG", "error");
    // The first 20 queries warm the process (page cache, the vector copy) and are not counted.
    let warm: Vec<String> = queries.iter().take(20).cloned().collect();
    let input = warm.iter().chain(queries).map(|q| format!("{q}\n")).collect::<String>();
    let done = process::run(&mut cmd, Some(input), LIMIT).map_err(|e| anyhow::anyhow!("{} harness: {e}", b.name))?;
    let mut ms = Vec::new();
    let mut paths = Vec::new();
    for line in done.stdout.lines().skip(warm.len()) {
        let v: serde_json::Value = serde_json::from_str(line)?;
        ms.push(v["ms"].as_f64().unwrap_or(f64::NAN));
        paths.push(v["paths"].as_array().map(|a| a.iter().filter_map(|p| p["path"].as_str().map(String::from)).collect()).unwrap_or_default());
    }
    if ms.len() != queries.len() {
        bail!("{} harness answered {} of {} queries", b.name, ms.len(), queries.len());
    }
    ms.sort_by(f64::total_cmp);
    Ok((ms, paths, done.cost.peak_mb))
}

/// `memory_search` latencies (ms, sorted) through a build's `memory serve` (MCP over stdio, as an agent's client
/// calls it), after 20 warm-up queries, and the server's resident memory (MB) at the end and at its peak.
fn through_serve(b: &Build, ws: &Path, state: &Path, queries: &[String]) -> anyhow::Result<(Vec<f64>, (f64, f64))> {
    let mut session = crate::mcp::Session::start(memory_cmd(b, ws, state).arg("serve"))?;
    for q in queries.iter().take(20) {
        session.search(q)?;
    }
    let mut ms = Vec::new();
    for q in queries {
        let t = std::time::Instant::now();
        session.search(q)?;
        ms.push(t.elapsed().as_secs_f64() * 1e3);
    }
    ms.sort_by(f64::total_cmp);
    Ok((ms, session.resident_mb().unwrap_or((f64::NAN, f64::NAN))))
}

/// Keyword-only (`provider: "none"`), with the freshness check before each search (the default).
const KEYWORD_CONFIG: &str = "none.json5";
/// The same without the check (`sync.onSearch: false`): what the search itself costs.
const KEYWORD_NO_CHECK_CONFIG: &str = "none-no-check.json5";

fn write_keyword_configs(state: &Path) -> anyhow::Result<()> {
    std::fs::write(state.join(KEYWORD_CONFIG), "{ memory: { search: { provider: \"none\" } } }")?;
    std::fs::write(state.join(KEYWORD_NO_CHECK_CONFIG), "{ memory: { search: { provider: \"none\", sync: { onSearch: false } } } }")?;
    Ok(())
}

fn memory_cmd(b: &Build, ws: &Path, state: &Path) -> Command {
    memory_cmd_with(b, ws, state, KEYWORD_CONFIG)
}

fn memory_cmd_with(b: &Build, ws: &Path, state: &Path, config: &str) -> Command {
    let mut c = Command::new(&b.memory);
    c.arg("--workspace").arg(ws).arg("--state-dir").arg(state).env("RUST_LOG", "error");
    c.env("OPENCLAW_STATE_DIR", state.join("no-openclaw")).env("MEMORY_CONFIG", state.join(config));
    c
}

/// Median wall time (ms) of one-shot `memory search` over `queries`, each run `runs` times (interleaved by the
/// caller across builds so that both see the same load).
fn whole_process(b: &Build, ws: &Path, state: &Path, config: &str, queries: &[String]) -> anyhow::Result<f64> {
    let mut ms = Vec::new();
    for q in queries {
        let done = process::run(memory_cmd_with(b, ws, state, config).args(["search", q.as_str(), "--json"]), None, LIMIT)
            .map_err(|e| anyhow::anyhow!("{} search: {e}", b.name))?;
        ms.push(done.cost.wall_s * 1e3);
    }
    ms.sort_by(f64::total_cmp);
    Ok(percentile(&ms, 0.5))
}

/// Where the `memory` binary keeps agent `main`'s builtin index of `ws` (the default config's space).
fn builtin_index_file(state: &Path, ws: &Path) -> PathBuf {
    memory_core::space::AgentSpace::resolve(&memory_core::Config::default(), ws, state, "main").index_file("builtin", "sqlite")
}

/// recall@10 of this build's vector search against sqlite-vec's exact scan, averaged over `queries`.
async fn vector_recall(ws: &Path, state: &Path, queries: &[String]) -> anyhow::Result<(f64, f64, f64)> {
    let path = builtin_index_file(state, ws);
    let live = SqliteStorage::new(path).live_path()?;
    let store = SqliteStore::open(&live)?;
    let embedder = seeded_embedder(SEEDED_DIMS, SEEDED_SEED);
    let mut total = 0.0;
    let (mut fast_ms, mut exact_ms) = (Vec::new(), Vec::new());
    for q in queries {
        let v = embedder.embed(std::slice::from_ref(q), EmbeddingPurpose::Query).await?.remove(0);
        let t = std::time::Instant::now();
        let exact = store.exact_vector_search(&v, 10, &Scope::default())?;
        exact_ms.push(t.elapsed().as_secs_f64() * 1e3);
        let t = std::time::Instant::now();
        let fast = store.vector_search(&v, 10, &Scope::default()).await?;
        fast_ms.push(t.elapsed().as_secs_f64() * 1e3);
        let found = exact.iter().filter(|e| fast.iter().any(|f| f.chunk_id == e.chunk_id)).count();
        total += if exact.is_empty() { 1.0 } else { found as f64 / exact.len() as f64 };
    }
    store.close_now();
    fast_ms.sort_by(f64::total_cmp);
    exact_ms.sort_by(f64::total_cmp);
    // The first fast search builds the copy: the median leaves it out.
    Ok((total / queries.len() as f64, percentile(&fast_ms, 0.5), percentile(&exact_ms, 0.5)))
}

fn load() -> String {
    std::fs::read_to_string("/proc/loadavg").map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" ")).unwrap_or_default()
}

/// One line of in-process figures (p50, p99, result paths) per build; with two builds, the ratios and how many
/// queries got the same results.
fn print_in_process<P: PartialEq>(label: &str, builds: &[Build], figs: &[(f64, f64, Vec<P>)]) {
    let line: Vec<String> = builds.iter().zip(figs).map(|(b, f)| format!("{} p50 {:.2} ms p99 {:.2} ms", b.name, f.0, f.1)).collect();
    let (r, same) = match figs {
        // Builds are [new, old].
        [new, old] => {
            let eq = new.2.iter().zip(&old.2).filter(|(a, b)| a == b).count();
            (format!("  (p50 {} p99 {})", ratio(old.0, new.0), ratio(old.1, new.1)), format!("; same results for {eq}/{} queries", new.2.len()))
        }
        _ => (String::new(), String::new()),
    };
    println!("{label}: {}{r}{same}", line.join(" | "));
}

fn ratio(old: f64, new: f64) -> String {
    if new > 0.0 && old.is_finite() {
        format!("{:.1}x", old / new)
    } else {
        "-".into()
    }
}

pub async fn run(opts: Options) -> anyhow::Result<()> {
    let builds = builds(&opts.old)?;
    let root_dir = match &opts.keep {
        Some(p) => {
            std::fs::create_dir_all(p)?;
            None
        }
        None => Some(tempfile::tempdir()?),
    };
    let root = opts.keep.clone().unwrap_or_else(|| root_dir.as_ref().unwrap().path().to_path_buf());
    println!(
        "memory-bench scale: builds {}; load average {}",
        builds.iter().map(|b| format!("{}={}", b.name, b.memory.display())).collect::<Vec<_>>().join(", "),
        load()
    );
    let mixed = corpus::queries(opts.queries, opts.seed);
    let common = corpus::common_queries(opts.queries, opts.seed);
    let mut sizes: Vec<usize> = opts.notes.iter().chain(&opts.hybrid_notes).copied().collect();
    sizes.sort_unstable();
    sizes.dedup();
    for &n in &sizes {
        let dir = root.join(format!("n{n}"));
        let ws = dir.join("ws");
        if !ws.join("MEMORY.md").exists() {
            std::fs::create_dir_all(&ws)?;
            corpus::generate(&ws, n, opts.seed)?;
            // Let file times settle (see freshness.rs) before indexing.
            std::thread::sleep(Duration::from_millis(2100));
        }
        println!("\n## {n} notes (load {})", load());
        if opts.prepare_only {
            if opts.notes.contains(&n) {
                keyword_index(&builds[0], &dir.join("state-keyword"), &ws)?;
            }
            if opts.hybrid_notes.contains(&n) {
                hybrid_index(&builds[0], &dir.join("state-hybrid"), &ws)?;
            }
            continue;
        }
        if opts.notes.contains(&n) {
            keyword(&builds, &dir, &ws, &mixed, &common, &opts).await?;
        }
        if opts.hybrid_notes.contains(&n) {
            hybrid(&builds, &dir, &ws, &mixed).await?;
        }
    }
    println!("\nload average at end: {}", load());
    Ok(())
}

async fn keyword(builds: &[Build], dir: &Path, ws: &Path, mixed: &[String], common: &[String], opts: &Options) -> anyhow::Result<()> {
    let state = dir.join("state-keyword");
    if opts.index_runs {
        // Cold index and no-change re-index by each build, each into its own state folder.
        for b in builds {
            let s = dir.join(format!("state-cold-{}", b.name));
            let _ = std::fs::remove_dir_all(&s);
            std::fs::create_dir_all(&s)?;
            write_keyword_configs(&s)?;
            let cold = process::run(memory_cmd(b, ws, &s).arg("index"), None, LIMIT).map_err(|e| anyhow::anyhow!("{e}"))?;
            let mut re = Vec::new();
            for _ in 0..5 {
                re.push(process::run(memory_cmd(b, ws, &s).arg("index"), None, LIMIT).map_err(|e| anyhow::anyhow!("{e}"))?.cost.wall_s * 1e3);
            }
            re.sort_by(f64::total_cmp);
            println!(
                "keyword cold index [{}]: {:.3} s wall, {:.3} s cpu, {:.1} MB peak; no-change re-index median {:.1} ms",
                b.name,
                cold.cost.wall_s,
                cold.cost.cpu_s,
                cold.cost.peak_mb,
                percentile(&re, 0.5)
            );
            let _ = std::fs::remove_dir_all(&s);
        }
    }
    let idx = keyword_index(&builds[0], &state, ws)?;
    keyword_engine_only(&idx, mixed, common).await?;
    let mut rows = Vec::new();
    for (label, qs) in [("mixed queries", mixed), ("common-word queries", common)] {
        let mut figs = Vec::new();
        for b in builds {
            let (ms, paths, _) = in_process(b, "keyword", ws, &state, qs)?;
            figs.push((percentile(&ms, 0.5), percentile(&ms, 0.99), paths));
        }
        rows.push((label, figs));
    }
    for (label, figs) in &rows {
        print_in_process(&format!("keyword in-process, {label}"), builds, figs);
    }
    for b in builds {
        let (ms, (rss, peak)) = through_serve(b, ws, &state, mixed)?;
        println!(
            "keyword through `memory serve`, mixed queries [{}]: p50 {:.2} ms p99 {:.2} ms; resident {rss:.1} MB (peak {peak:.1} MB)",
            b.name,
            percentile(&ms, 0.5),
            percentile(&ms, 0.99)
        );
    }
    // Whole process: a few common-word queries and a rare word, builds interleaved.
    let picks: Vec<String> = common.iter().take(opts.whole_process_runs).cloned().collect();
    let rare = vec!["E4242".to_string(); opts.whole_process_runs];
    for (label, qs) in [("common-word", &picks), ("rare-word", &rare)] {
        for (check, config) in [("with the freshness check", KEYWORD_CONFIG), ("without it (onSearch: false)", KEYWORD_NO_CHECK_CONFIG)] {
            let mut meds = Vec::new();
            for b in builds {
                meds.push(whole_process(b, ws, &state, config, qs)?);
            }
            let line: Vec<String> = builds.iter().zip(&meds).map(|(b, m)| format!("{} {:.1} ms", b.name, m)).collect();
            let r = if meds.len() == 2 { format!("  ({})", ratio(meds[1], meds[0])) } else { String::new() };
            println!("keyword whole-process `memory search`, {label}, {check} (median of {}): {}{r}", qs.len(), line.join(" | "));
        }
    }
    Ok(())
}

/// The keyword index in `state`, built by `b` when missing; its path.
fn keyword_index(b: &Build, state: &Path, ws: &Path) -> anyhow::Result<PathBuf> {
    std::fs::create_dir_all(state)?;
    write_keyword_configs(state)?;
    let idx = builtin_index_file(state, ws);
    if !idx.exists() {
        let t = std::time::Instant::now();
        process::run(memory_cmd(b, ws, state).arg("index"), None, LIMIT).map_err(|e| anyhow::anyhow!("{e}"))?;
        println!("(keyword index built by the {} build in {:.1} s)", b.name, t.elapsed().as_secs_f64());
    }
    Ok(idx)
}

/// The hybrid index (seeded embedder) in `state`, built by `b`'s harness when missing.
fn hybrid_index(b: &Build, state: &Path, ws: &Path) -> anyhow::Result<()> {
    let idx = builtin_index_file(state, ws);
    if !idx.exists() {
        let t = std::time::Instant::now();
        let mut cmd = Command::new(&b.bench);
        cmd.args(["harness", "--mode", "hybrid", "--workspace"]).arg(ws).arg("--state-dir").arg(state).arg("index");
        process::run(&mut cmd, None, LIMIT).map_err(|e| anyhow::anyhow!("hybrid index: {e}")).context("hybrid index")?;
        println!("(hybrid index built by the {} build in {:.1} s)", b.name, t.elapsed().as_secs_f64());
    }
    Ok(())
}

/// The store's keyword candidates alone (no freshness check, no ranking): bounded (this build) against the
/// same store unbounded (every term, as before), in this process, alternating query by query.
async fn keyword_engine_only(idx: &Path, mixed: &[String], common: &[String]) -> anyhow::Result<()> {
    let live = SqliteStorage::new(idx).live_path()?;
    let store = SqliteStore::open(&live)?;
    for (label, qs) in [("mixed", mixed), ("common-word", common)] {
        let (mut bounded, mut unbounded) = (Vec::new(), Vec::new());
        let mut same = 0;
        for q in qs {
            let terms = memory_core::analysis::query_terms(q);
            if terms.is_empty() {
                continue;
            }
            let kq = memory_core::store::KeywordQuery { terms };
            let t = std::time::Instant::now();
            let a = store.keyword_search(&kq, 24, &Scope::default()).await?;
            bounded.push(t.elapsed().as_secs_f64() * 1e3);
            let t = std::time::Instant::now();
            let b = store.unbounded_keyword_candidates(&kq, 24, &Scope::default())?;
            unbounded.push(t.elapsed().as_secs_f64() * 1e3);
            if a.iter().map(|c| &c.chunk_id).eq(b.iter().map(|c| &c.chunk_id)) {
                same += 1;
            }
        }
        bounded.sort_by(f64::total_cmp);
        unbounded.sort_by(f64::total_cmp);
        println!(
            "keyword engine only, {label} queries: bounded p50 {:.2} ms p99 {:.2} ms | unbounded p50 {:.2} ms p99 {:.2} ms  (p50 {} p99 {}); same top-24 for {same}/{}",
            percentile(&bounded, 0.5),
            percentile(&bounded, 0.99),
            percentile(&unbounded, 0.5),
            percentile(&unbounded, 0.99),
            ratio(percentile(&unbounded, 0.5), percentile(&bounded, 0.5)),
            ratio(percentile(&unbounded, 0.99), percentile(&bounded, 0.99)),
            bounded.len()
        );
    }
    store.close_now();
    Ok(())
}

async fn hybrid(builds: &[Build], dir: &Path, ws: &Path, mixed: &[String]) -> anyhow::Result<()> {
    let state = dir.join("state-hybrid");
    hybrid_index(&builds[0], &state, ws)?;
    let mut figs = Vec::new();
    let mut peaks = Vec::new();
    for b in builds {
        let (ms, paths, peak) = in_process(b, "hybrid", ws, &state, mixed)?;
        figs.push((percentile(&ms, 0.5), percentile(&ms, 0.99), paths));
        peaks.push(format!("{} {peak:.1} MB", b.name));
    }
    print_in_process("hybrid in-process, mixed queries", builds, &figs);
    println!("hybrid in-process peak resident memory (the engine a `memory serve` holds): {}", peaks.join(" | "));
    let (recall, fast, exact) = vector_recall(ws, &state, &mixed[..mixed.len().min(100)]).await?;
    println!(
        "vector search alone: recall@10 vs exact scan {recall:.4}; median fast {fast:.2} ms, sqlite-vec exact {exact:.2} ms ({})",
        ratio(exact, fast)
    );
    Ok(())
}
