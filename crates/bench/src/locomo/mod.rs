//! Long-conversation recall on LoCoMo-style workspaces (`../shared/datasets/locomo-dev`, its README): each
//! session a daily log, one turn a line; each question searched with `memory_search {query, maxResults: 10,
//! minScore: 0}` on its conversation's workspace. R@k: share of the evidence turns whose line lies inside a
//! returned hit's line range; S@k: share of the evidence turns whose text (first 50 characters, whitespace
//! collapsed, case folded) appears in a returned snippet (what the agent reads). Per category and overall, the
//! mean over questions; category 5 (adversarial: not answered by the conversation) is left out.

use memory_core::locks::LockExt;
use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use memory_builtin::BuiltinFactory;
use memory_core::registry::OpenContext;
use memory_core::{Config, MemoryBackend, SearchRequest, SearchResult, SyncOptions};

mod costs;
mod dataset;
mod metrics;
mod recording;
mod report;
mod served;

pub use costs::{rerank_cost, snippet_cost};
use dataset::{load, Question};
use metrics::{best_five, score_question, Tally, ORACLE_DEPTHS};
pub(crate) use recording::Recording;
use report::{print_miss, report};
use served::served_keyword;

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
            config.memory.search.query.now = dataset::asked_on(&opts.dataset.join(conv).join("ws"));
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
                    .search(&SearchRequest { max_results: Some(opts.depth), min_score: Some(0.0), ..SearchRequest::new(q.question.clone()) })
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
