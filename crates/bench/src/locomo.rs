//! Long-conversation recall on LoCoMo-style workspaces (`../shared/datasets/locomo-dev`, its README): each
//! session a daily log, one turn a line; each question searched with `memory_search {query, maxResults: 10,
//! minScore: 0}` on its conversation's workspace. R@k: share of the evidence turns whose line lies inside a
//! returned hit's line range; S@k: share of the evidence turns whose text (first 50 characters, whitespace
//! collapsed, case folded) appears in a returned snippet (what the agent reads). Per category and overall, the
//! mean over questions; category 5 (adversarial: not answered by the conversation) is left out.

use memory_core::locks::LockExt;
use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use anyhow::{bail, Context};
use memory_builtin::BuiltinFactory;
use memory_core::registry::OpenContext;
use memory_core::{Config, MemoryBackend, SearchRequest, SearchResult, SyncOptions};
use serde::Deserialize;

#[derive(Deserialize)]
pub struct Evidence {
    pub path: String,
    pub line: usize,
    pub text: String,
}

#[derive(Deserialize)]
pub struct Question {
    pub conv: String,
    pub id: String,
    pub question: String,
    pub category: u32,
    #[serde(default)]
    pub evidence: Vec<Evidence>,
}

pub const KS: [usize; 3] = [1, 5, 10];

/// R@k and S@k for k in [`KS`], summed over questions (divide by `n`).
#[derive(Default, Clone)]
pub struct Tally {
    pub n: usize,
    pub recall: [f64; 3],
    pub seen: [f64; 3],
}

impl Tally {
    fn add(&mut self, recall: [f64; 3], seen: [f64; 3]) {
        self.n += 1;
        for i in 0..3 {
            self.recall[i] += recall[i];
            self.seen[i] += seen[i];
        }
    }

    pub fn mean(&self) -> ([f64; 3], [f64; 3]) {
        let n = self.n.max(1) as f64;
        (self.recall.map(|v| v / n), self.seen.map(|v| v / n))
    }
}

/// The evidence text as the metric compares it: its first 50 characters, whitespace collapsed, case folded.
pub fn evidence_key(text: &str) -> String {
    fold(text).chars().take(50).collect()
}

/// Whitespace runs as one space, lowercased.
pub fn fold(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ").to_lowercase()
}

/// (R, S) of one question's hits at each k.
pub fn score_question(q: &Question, hits: &[SearchResult]) -> ([f64; 3], [f64; 3]) {
    let folded: Vec<String> = hits.iter().map(|h| fold(&h.snippet)).collect();
    let n = q.evidence.len().max(1) as f64;
    let mut recall = [0.0; 3];
    let mut seen = [0.0; 3];
    for (i, &k) in KS.iter().enumerate() {
        let top = &hits[..k.min(hits.len())];
        let r = q.evidence.iter().filter(|e| top.iter().any(|h| h.path == e.path && h.start_line <= e.line && e.line <= h.end_line)).count();
        let s = q.evidence.iter().filter(|e| folded[..top.len()].iter().any(|f| f.contains(&evidence_key(&e.text)))).count();
        recall[i] = r as f64 / n;
        seen[i] = s as f64 / n;
    }
    (recall, seen)
}

/// The depths at which a deeper search (`--depth`) reports [`best_five`].
const ORACLE_DEPTHS: [usize; 3] = [10, 20, 40];

/// R@5 of the best five of `hits` for this question: what a second stage that reorders those candidates perfectly
/// could reach (the bound of any reranker over them). Exact: the evidence a hit covers is a set, and the best five
/// of the sets no other contains are tried (greedy when there are too many to try).
pub fn best_five(q: &Question, hits: &[SearchResult]) -> f64 {
    let covers = |h: &SearchResult| -> u64 {
        q.evidence
            .iter()
            .take(64)
            .enumerate()
            .filter(|(_, e)| h.path == e.path && h.start_line <= e.line && e.line <= h.end_line)
            .fold(0, |m, (i, _)| m | 1 << i)
    };
    let mut sets: Vec<u64> = hits.iter().map(covers).filter(|&m| m != 0).collect();
    sets.sort_unstable();
    sets.dedup();
    let maximal: Vec<u64> = sets.iter().copied().filter(|&m| !sets.iter().any(|&o| o != m && o & m == m)).collect();
    fn best(sets: &[u64], left: usize, have: u64) -> u32 {
        match sets.split_first() {
            Some((&first, rest)) if left > 0 => best(rest, left - 1, have | first).max(best(rest, left, have)),
            _ => have.count_ones(),
        }
    }
    let covered = if maximal.len() <= 24 {
        best(&maximal, 5, 0)
    } else {
        let mut have = 0u64;
        for _ in 0..5 {
            have |= maximal.iter().copied().max_by_key(|&m| (m & !have).count_ones()).unwrap_or(0);
        }
        have.count_ones()
    };
    covered as f64 / q.evidence.len().max(1) as f64
}

pub fn load(dir: &Path) -> anyhow::Result<Vec<Question>> {
    let file = dir.join("questions.jsonl");
    if !file.exists() {
        bail!("{} has no questions.jsonl (pass --dataset; the project's data lives in ../shared/datasets/locomo-dev)", dir.display());
    }
    let text = std::fs::read_to_string(&file).with_context(|| format!("reading {}", file.display()))?;
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        out.push(serde_json::from_str(line).with_context(|| format!("questions.jsonl line {}", i + 1))?);
    }
    Ok(out)
}

pub struct Options {
    pub dataset: PathBuf,
    /// Models to evaluate vector-only and hybrid search with (keyword is always evaluated).
    pub models: Vec<PathBuf>,
    /// Print each question that misses at k = 5 (evidence not read) with what was returned.
    pub misses: bool,
    /// Keep indexes here (later runs reuse the embeddings).
    pub keep: Option<PathBuf>,
    /// Write each setup's answers here, one `<setup>.jsonl` ([`DumpLine`]).
    pub dump: Option<PathBuf>,
    /// `maxResults` of each search (at least ten; the figures count the first ten hits).
    pub depth: usize,
    /// Only these modes (keyword, vector, hybrid); all when empty.
    pub modes: Vec<String>,
    /// Reranker folders (a cross-encoder or a late-interaction model, told by their files): every setup also
    /// runs with each, at each of `rerank_candidates`.
    pub rerankers: Vec<PathBuf>,
    /// `memory.search.query.rerank`'s candidates (one reranked run each), weight and budget for those runs.
    pub rerank_candidates: Vec<usize>,
    pub rerank_weight: f64,
    pub rerank_budget_ms: u64,
    /// Also run keyword search through `memory serve` (this `memory` binary) as an agent's MCP client calls it:
    /// the same figures, and the latency a client sees.
    pub served: Option<PathBuf>,
    /// Also run the QMD engine with this `qmd` command (`search` mode; reranked too with `reranker`).
    pub qmd: Option<PathBuf>,
}

/// One question's answer in a `--dump` file: the hits as returned and, for a reranked setup, the reranker's logits
/// in the order it was handed the candidates (the first stage's: the same setup without reranking ranks them so).
#[derive(serde::Serialize)]
struct DumpLine<'a> {
    id: &'a str,
    category: u32,
    hits: &'a [SearchResult],
    #[serde(skip_serializing_if = "Option::is_none")]
    logits: Option<Vec<f32>>,
}

/// A reranker that remembers the logits of its last call (searches run one at a time), for `--dump`, and what its
/// calls cost: milliseconds and candidates summed.
pub(crate) struct Recording {
    inner: Arc<dyn memory_core::rerank::Reranker>,
    last: std::sync::Mutex<Option<Vec<f32>>>,
    cost: std::sync::Mutex<(f64, usize)>,
}

impl Recording {
    pub(crate) fn open(dir: &Path) -> anyhow::Result<Arc<Recording>> {
        Ok(Arc::new(Recording { inner: providers::open_reranker(dir)?.into_shared(), last: Default::default(), cost: Default::default() }))
    }

    pub(crate) fn cost(&self) -> (f64, usize) {
        *self.cost.locked()
    }
}

#[async_trait::async_trait]
impl memory_core::rerank::Reranker for Recording {
    fn id(&self) -> &str {
        self.inner.id()
    }

    async fn score(&self, query: &str, passages: &[String], deadline: Instant) -> Result<Vec<f32>, memory_core::rerank::RerankError> {
        let t = Instant::now();
        let out = self.inner.score(query, passages, deadline).await;
        let mut cost = self.cost.locked();
        cost.0 += t.elapsed().as_secs_f64() * 1e3;
        cost.1 += passages.len();
        *self.last.locked() = out.as_ref().ok().cloned();
        out
    }
}

struct Run {
    label: String,
    by_category: BTreeMap<u32, Tally>,
    all: Tally,
    latencies_ms: Vec<f64>,
    /// Summed [`best_five`] at each of [`ORACLE_DEPTHS`] the search's depth reaches.
    oracle: Vec<(usize, f64)>,
    /// A reranked run's reranking time per candidate (ms), over all its calls.
    rerank_ms_per_candidate: Option<f64>,
}

/// A reranker folder's name, short enough for a setup label: its first word (`ms-marco-MiniLM-L-12-v2` -> `ms`,
/// `answerai-colbert-small-v1` -> `answerai`), at most ten characters.
pub fn short_name(name: &str) -> String {
    name.split(['-', '_', '.']).find(|w| !w.is_empty()).unwrap_or(name).chars().take(10).collect()
}

/// One run of the benchmark: its label, model, vector and text weights, and (reranker index, candidates) when
/// reranked.
type Setup = (String, Option<PathBuf>, f64, f64, Option<(usize, usize)>);

/// The label of the QMD engine's setup.
const QMD_SETUP: &str = "qmd search";

pub async fn run(opts: Options) -> anyhow::Result<()> {
    let questions: Vec<Question> = load(&opts.dataset)?.into_iter().filter(|q| q.category != 5 && !q.evidence.is_empty()).collect();
    let mut convs: Vec<String> = questions.iter().map(|q| q.conv.clone()).collect();
    convs.sort();
    convs.dedup();
    println!(
        "LoCoMo: {} answerable questions over {} conversations ({}); ranking settings: {}",
        questions.len(),
        convs.len(),
        opts.dataset.display(),
        crate::RANKING_PROFILE.get().map_or("default", String::as_str)
    );
    let tmp = tempfile::tempdir()?;
    let state_root = opts.keep.clone().unwrap_or_else(|| tmp.path().to_path_buf());
    let want = |m: &str| opts.modes.is_empty() || opts.modes.iter().any(|x| x == m);
    let mut setups: Vec<(String, Option<PathBuf>, f64, f64)> = Vec::new();
    if want("keyword") {
        setups.push(("keyword".into(), None, 0.0, 1.0));
    }
    if opts.qmd.is_some() {
        setups.push((QMD_SETUP.into(), None, 0.0, 1.0));
    }
    for m in &opts.models {
        let name = m.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        if want("vector") {
            setups.push((format!("vector {name}"), Some(m.clone()), 1.0, 0.0));
        }
        if want("hybrid") {
            setups.push((format!("hybrid {name}"), Some(m.clone()), 0.7, 0.3));
        }
    }
    let recordings: Vec<Arc<Recording>> = opts.rerankers.iter().map(|dir| Recording::open(dir)).collect::<anyhow::Result<_>>()?;
    if let Some(dir) = &opts.dump {
        std::fs::create_dir_all(dir)?;
    }
    // Each setup, then the same with each reranker at each candidate count: (reranker index, candidates).
    let one = opts.rerankers.len() == 1;
    let setups: Vec<Setup> = setups
        .into_iter()
        .flat_map(|(label, m, vw, tw)| {
            let mut with = vec![(label.clone(), m.clone(), vw, tw, None)];
            for (i, dir) in opts.rerankers.iter().enumerate() {
                for &n in &opts.rerank_candidates {
                    let name = dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
                    let tag = if one { format!("+rerank {n}") } else { format!("+{} {n}", short_name(&name)) };
                    with.push((format!("{label} {tag}"), m.clone(), vw, tw, Some((i, n))));
                }
            }
            with
        })
        .collect();
    let mut runs = Vec::new();
    for (label, model, vw, tw, rerank_with) in setups {
        let rerank = rerank_with.is_some();
        let recording = rerank_with.map(|(i, _)| recordings[i].clone());
        let reranker: Option<Arc<dyn memory_core::rerank::Reranker>> = recording.clone().map(|r| r as Arc<dyn memory_core::rerank::Reranker>);
        let cost_before = recording.as_ref().map(|r| r.cost()).unwrap_or_default();
        let embedder = crate::quality::local_embedder(model.as_deref())?;
        let oracle = ORACLE_DEPTHS.into_iter().filter(|&d| d <= opts.depth).map(|d| (d, 0.0)).collect();
        let mut run = Run {
            label: label.clone(),
            by_category: BTreeMap::new(),
            all: Tally::default(),
            latencies_ms: Vec::new(),
            oracle,
            rerank_ms_per_candidate: None,
        };
        let mut dump = match &opts.dump {
            Some(dir) => Some(std::io::BufWriter::new(std::fs::File::create(dir.join(format!("{}.jsonl", label.replace(' ', "_"))))?)),
            None => None,
        };
        for conv in &convs {
            let mut config = Config::default();
            config.memory.search.query.min_score = 0.0;
            config.memory.search.query.hybrid.vector_weight = vw;
            crate::apply_ranking_profile(&mut config);
            config.memory.search.query.hybrid.text_weight = tw;
            if let Some((i, n)) = rerank_with {
                let r = &mut config.memory.search.query.rerank;
                r.enabled = true;
                r.model_path = Some(opts.rerankers[i].display().to_string());
                r.candidates = n;
                r.weight = opts.rerank_weight;
                r.budget_ms = opts.rerank_budget_ms;
            }
            // One index per conversation and model: the weights are ranking settings, not index identity.
            let model_key = model.as_ref().and_then(|m| m.file_name()).map_or_else(|| "keyword".into(), |n| n.to_string_lossy().into_owned());
            let ctx = OpenContext::new(Arc::new(config), opts.dataset.join(conv).join("ws"), state_root.join(&model_key), conv)
                .with_embedder(embedder.clone())
                .with_reranker(if rerank { reranker.clone() } else { None });
            let engine: Box<dyn MemoryBackend> = match (&opts.qmd, label.starts_with(QMD_SETUP)) {
                (Some(command), true) => {
                    let mut config = (*ctx.config).clone();
                    config.memory.backend = "qmd".into();
                    let mut q = memory_qmd::config::QmdConfig::from_config(&config)?;
                    q.command = Some(command.display().to_string());
                    q.update.wait_for_boot_sync = true;
                    q.update.interval = None;
                    q.update.embed_interval = None;
                    q.write_to(&mut config)?;
                    let ctx = OpenContext::new(Arc::new(config), opts.dataset.join(conv).join("ws"), state_root.join("qmd"), conv)
                        .with_reranker(if rerank { reranker.clone() } else { None });
                    Box::new(memory_qmd::QmdBackend::open(ctx, memory_qmd::QmdOptions::default()).await?)
                }
                _ => Box::new(BuiltinFactory.open_indexed(ctx).await?),
            };
            let started = Instant::now();
            let report = engine.sync(SyncOptions::default()).await?;
            if report.changed_anything() {
                eprintln!(
                    "({label} {conv}: indexed {} chunks, {} embedded, in {:.1} s)",
                    report.chunks_written,
                    report.chunks_embedded,
                    started.elapsed().as_secs_f64()
                );
            }
            for q in questions.iter().filter(|q| &q.conv == conv) {
                let t = Instant::now();
                let r = engine
                    .search(&SearchRequest {
                        query: q.question.clone(),
                        max_results: Some(opts.depth),
                        min_score: Some(0.0),
                        sources: vec![],
                        active_project_keys: vec![],
                    })
                    .await?;
                run.latencies_ms.push(t.elapsed().as_secs_f64() * 1e3);
                let (rec, seen) = score_question(q, &r.results);
                run.by_category.entry(q.category).or_default().add(rec, seen);
                run.all.add(rec, seen);
                for (depth, sum) in &mut run.oracle {
                    *sum += best_five(q, &r.results[..(*depth).min(r.results.len())]);
                }
                if opts.misses && seen[1] < 1.0 {
                    print_miss(q, &r.results, rec[1], seen[1]);
                }
                if let Some(out) = dump.as_mut() {
                    let logits = if rerank { recording.as_ref().and_then(|r| r.last.locked().take()) } else { None };
                    let line = DumpLine { id: &q.id, category: q.category, hits: &r.results, logits };
                    writeln!(out, "{}", serde_json::to_string(&line)?)?;
                }
            }
            engine.close().await?;
        }
        if let Some(r) = &recording {
            let (ms, n) = r.cost();
            run.rerank_ms_per_candidate = Some((ms - cost_before.0) / (n - cost_before.1).max(1) as f64);
        }
        runs.push(run);
    }
    if let Some(bin) = &opts.served {
        runs.push(served_keyword(bin, &opts.dataset, &questions, &convs, state_root.join("served").as_path())?);
    }
    report(&runs);
    Ok(())
}

/// Keyword search through `memory serve`: each question as `memory_search {query, maxResults: 10, minScore: 0}`
/// over MCP (stdio), timed from the request to its answer; one server per conversation, its index built by the
/// first search (not timed).
fn served_keyword(bin: &Path, dataset: &Path, questions: &[Question], convs: &[String], state: &Path) -> anyhow::Result<Run> {
    let mut run = Run {
        label: "keyword via memory serve".into(),
        by_category: BTreeMap::new(),
        all: Tally::default(),
        latencies_ms: Vec::new(),
        oracle: Vec::new(),
        rerank_ms_per_candidate: None,
    };
    for conv in convs {
        let state = state.join(conv);
        std::fs::create_dir_all(&state)?;
        std::fs::write(state.join("none.json5"), "{}")?;
        let mut cmd = std::process::Command::new(bin);
        cmd.arg("--workspace").arg(dataset.join(conv).join("ws")).arg("--state-dir").arg(&state).arg("serve");
        // Default settings, whatever the machine's OpenClaw or memory-rs config says.
        cmd.env("OPENCLAW_STATE_DIR", state.join("no-openclaw")).env("MEMORY_CONFIG", state.join("none.json5")).env("RUST_LOG", "error");
        let mut session = crate::mcp::Session::start(&mut cmd).with_context(|| format!("memory serve for {conv}"))?;
        let mut ask = |query: &str| -> anyhow::Result<(Vec<SearchResult>, f64)> {
            let t = Instant::now();
            let v = session
                .call("tools/call", serde_json::json!({"name": "memory_search", "arguments": {"query": query, "maxResults": 10, "minScore": 0}}))?;
            let ms = t.elapsed().as_secs_f64() * 1e3;
            let results = v["result"]["structuredContent"]["results"].clone();
            Ok((serde_json::from_value(results).with_context(|| format!("memory_search answer {v}"))?, ms))
        };
        ask("warm up: build the index")?;
        for q in questions.iter().filter(|q| &q.conv == conv) {
            let (hits, ms) = ask(&q.question)?;
            run.latencies_ms.push(ms);
            let (rec, seen) = score_question(q, &hits);
            run.by_category.entry(q.category).or_default().add(rec, seen);
            run.all.add(rec, seen);
        }
    }
    Ok(run)
}

/// What reranking costs: `runs` rerankings of n passages (each a turn-sized line of a LoCoMo session, the query one
/// of its questions) for each n, timed whole (tokenising, forward passes), after one warm-up.
pub fn rerank_cost(dataset: &Path, reranker: &Path, ns: &[usize], runs: usize) -> anyhow::Result<()> {
    let questions = load(dataset)?;
    let rr = providers::open_reranker(reranker)?;
    // Passages: the snippet-sized windows a search would hand the reranker, from the first conversation's logs.
    let ws = dataset.join(questions.first().map_or("conv-26", |q| q.conv.as_str())).join("ws/memory");
    let mut passages: Vec<String> = Vec::new();
    let mut names: Vec<_> = std::fs::read_dir(&ws)?.filter_map(|e| e.ok().map(|e| e.path())).collect();
    names.sort();
    for p in names {
        let text = std::fs::read_to_string(&p)?;
        let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
        for w in lines.chunks(3) {
            let mut s = w.join("\n");
            s.truncate(s.char_indices().nth(memory_core::ranking::RERANK_PASSAGE_CHARS).map_or(s.len(), |(i, _)| i));
            passages.push(s);
        }
    }
    let far = || Instant::now() + std::time::Duration::from_secs(3600);
    rr.score_blocking("warm up", &passages[..2], far())?;
    println!("reranker {}: {} passages available", reranker.display(), passages.len());
    println!("{:>6} {:>10} {:>10} {:>12}", "pairs", "p50 ms", "p95 ms", "ms / pair");
    for &n in ns {
        let mut times = Vec::new();
        for r in 0..runs {
            let q = &questions[(r * 7) % questions.len()].question;
            let start = (r * n) % passages.len().saturating_sub(n).max(1);
            let batch = &passages[start..(start + n).min(passages.len())];
            let t = Instant::now();
            rr.score_blocking(q, batch, far())?;
            times.push(t.elapsed().as_secs_f64() * 1e3);
        }
        times.sort_by(f64::total_cmp);
        println!("{n:>6} {:>10.1} {:>10.1} {:>12.2}", percentile(&times, 0.5), percentile(&times, 0.95), percentile(&times, 0.5) / n as f64);
    }
    Ok(())
}

/// What choosing a snippet costs per result: for every question, ten chunk-sized windows of its conversation
/// (12 turns each, ~1,600 characters, as the default chunking makes them), the query's terms weighted over them
/// (`SnippetQuery::new`) and a snippet chosen from each (`snippet::choose`), as `to_results` does for ten hits.
pub fn snippet_cost(dataset: &Path, rounds: usize) -> anyhow::Result<()> {
    use memory_core::ranking::{snippet, SNIPPET_MAX_CHARS};
    let questions: Vec<Question> = load(dataset)?.into_iter().filter(|q| q.category != 5).collect();
    let mut chunks: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for q in &questions {
        if chunks.contains_key(&q.conv) {
            continue;
        }
        let dir = dataset.join(&q.conv).join("ws/memory");
        let mut names: Vec<_> = std::fs::read_dir(&dir)?.filter_map(|e| e.ok().map(|e| e.path())).collect();
        names.sort();
        let mut out = Vec::new();
        for p in names {
            let text = std::fs::read_to_string(&p)?;
            let lines: Vec<&str> = text.lines().collect();
            out.extend(lines.chunks(12).map(|w| w.join("\n")));
        }
        chunks.insert(q.conv.clone(), out);
    }
    let mut per_result = Vec::new();
    let mut results = 0usize;
    for round in 0..rounds.max(1) {
        for (i, q) in questions.iter().enumerate() {
            let all = &chunks[&q.conv];
            let start = (i * 7 + round) % all.len().saturating_sub(10).max(1);
            let hits: Vec<&str> = all[start..(start + 10).min(all.len())].iter().map(String::as_str).collect();
            let t = Instant::now();
            let terms = snippet::SnippetQuery::new(&q.question, &hits);
            let mut shown = 0usize;
            for h in &hits {
                shown += snippet::choose(h, &terms, SNIPPET_MAX_CHARS).text.len();
            }
            let elapsed = t.elapsed().as_secs_f64() * 1e3;
            std::hint::black_box(shown);
            per_result.push(elapsed / hits.len() as f64);
            results += hits.len();
        }
    }
    per_result.sort_by(f64::total_cmp);
    println!("snippet selection: {results} results ({} searches of 10 hits)", per_result.len());
    println!(
        "per result: p50 {:.4} ms, p95 {:.4} ms, max {:.4} ms",
        percentile(&per_result, 0.5),
        percentile(&per_result, 0.95),
        per_result.last().copied().unwrap_or(0.0)
    );
    Ok(())
}

fn print_miss(q: &Question, hits: &[SearchResult], r5: f64, s5: f64) {
    println!("--- {} (cat {}) R@5 {r5:.2} S@5 {s5:.2}: {}", q.id, q.category, q.question);
    for e in &q.evidence {
        println!("    evidence {}:{}  {}", e.path, e.line, e.text.chars().take(100).collect::<String>());
    }
    for (i, h) in hits.iter().take(5).enumerate() {
        let first = h.snippet.lines().next().unwrap_or("").chars().take(90).collect::<String>();
        let shown = match (h.snippet_start_line, h.snippet_end_line) {
            (Some(a), Some(b)) => format!(" (snippet {a}-{b})"),
            _ => String::new(),
        };
        println!("    {}. {}:{}-{}{shown} {:.3}  {first}", i + 1, h.path, h.start_line, h.end_line, h.score);
    }
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

const CATEGORY_NAMES: [&str; 5] = ["multi-hop", "temporal", "open-domain", "single-hop", "adversarial"];

fn report(runs: &[Run]) {
    println!();
    println!(
        "{:<40} {:>6} {:>6} {:>6} {:>6} {:>6} {:>6} {:>8} {:>8} {:>10}",
        "setup", "R@1", "R@5", "R@10", "S@1", "S@5", "S@10", "p50 ms", "p95 ms", "rr ms/cand"
    );
    for run in runs {
        let mut lat = run.latencies_ms.clone();
        lat.sort_by(f64::total_cmp);
        let (r, s) = run.all.mean();
        println!(
            "{:<40} {:>6.3} {:>6.3} {:>6.3} {:>6.3} {:>6.3} {:>6.3} {:>8.2} {:>8.2} {:>10}",
            run.label,
            r[0],
            r[1],
            r[2],
            s[0],
            s[1],
            s[2],
            percentile(&lat, 0.5),
            percentile(&lat, 0.95),
            run.rerank_ms_per_candidate.map_or("-".to_string(), |ms| format!("{ms:.2}"))
        );
    }
    println!();
    println!("Per category (R@5 / S@5):");
    let cats: Vec<u32> = runs.iter().flat_map(|r| r.by_category.keys().copied()).collect::<std::collections::BTreeSet<_>>().into_iter().collect();
    print!("{:<40}", "setup");
    for c in &cats {
        let name = CATEGORY_NAMES.get(*c as usize - 1).copied().unwrap_or("?");
        print!(" {:>18}", format!("{c} {name} (n={})", runs[0].by_category.get(c).map_or(0, |t| t.n)));
    }
    println!();
    for run in runs {
        print!("{:<40}", run.label);
        for c in &cats {
            let (r, s) = run.by_category.get(c).map(Tally::mean).unwrap_or_default();
            print!(" {:>18}", format!("{:.3} / {:.3}", r[1], s[1]));
        }
        println!();
    }
    if runs.iter().any(|r| r.oracle.len() > 1) {
        println!();
        println!("R@5 of a perfect second stage over the first N hits (the most any reranking of them could reach):");
        for run in runs.iter().filter(|r| !r.oracle.is_empty()) {
            let n = run.all.n.max(1) as f64;
            let cells: Vec<String> = run.oracle.iter().map(|(d, sum)| format!("N={d} {:.3}", sum / n)).collect();
            println!("{:<40} {}", run.label, cells.join("  "));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use memory_core::Source;

    fn hit(path: &str, start: usize, end: usize, snippet: &str) -> SearchResult {
        SearchResult::new(Source::Memory, path, start, end, 1.0, snippet)
    }

    #[test]
    fn recall_counts_the_line_range_and_seen_counts_the_snippet() {
        let q = Question {
            conv: "c".into(),
            id: "q".into(),
            question: "?".into(),
            category: 1,
            evidence: vec![
                Evidence { path: "memory/a.md".into(), line: 5, text: "Researching   adoption agencies".into() },
                Evidence { path: "memory/b.md".into(), line: 2, text: "Other".into() },
            ],
        };
        let hits = vec![hit("memory/x.md", 1, 9, "nothing"), hit("memory/a.md", 3, 8, "x\nCaroline: researching adoption agencies — a dream\n")];
        let (r, s) = score_question(&q, &hits);
        assert_eq!(r, [0.0, 0.5, 0.5]);
        assert_eq!(s, [0.0, 0.5, 0.5]);
        // In range but not shown: recalled, not seen.
        let hits = vec![hit("memory/a.md", 3, 8, "something else")];
        let (r, s) = score_question(&q, &hits);
        assert_eq!((r[0], s[0]), (0.5, 0.0));
    }

    #[test]
    fn the_best_five_cover_the_most_evidence_the_hits_can() {
        let line = |l: usize| Evidence { path: "memory/a.md".into(), line: l, text: String::new() };
        let q = Question { conv: "c".into(), id: "q".into(), question: "?".into(), category: 1, evidence: (1..=6).map(|i| line(i * 10)).collect() };
        // Six evidence lines in six hits, one of them behind hits that cover nothing: five of six at most.
        let mut hits: Vec<SearchResult> = (0..4).map(|i| hit("memory/x.md", i, i, "")).collect();
        hits.extend((1..=6).map(|i| hit("memory/a.md", i * 10, i * 10, "")));
        assert!((best_five(&q, &hits) - 5.0 / 6.0).abs() < 1e-9);
        // One hit spanning two lines lets five hits cover all six.
        hits.push(hit("memory/a.md", 10, 20, ""));
        assert!((best_five(&q, &hits) - 1.0).abs() < 1e-9);
        assert_eq!(best_five(&q, &hits[..4]), 0.0);
    }
}
