//! Retrieval quality on Cranfield: one Markdown file per document (`memory/cranfield/<id>.md`, first line
//! `# <title>`), the dev queries run through the real engine, ranked files scored against graded judgments.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use anyhow::{bail, Context};
use memory_builtin::BuiltinFactory;
use memory_core::registry::OpenContext;
use memory_core::{Config, MemoryBackend, SearchRequest, SyncOptions};
use serde::Deserialize;

#[derive(Deserialize)]
pub struct Doc {
    pub id: String,
    pub title: String,
    pub text: String,
}

#[derive(Deserialize)]
pub struct Query {
    pub id: String,
    pub text: String,
}

pub struct Dataset {
    pub docs: Vec<Doc>,
    pub queries: Vec<Query>,
    /// query id -> doc id -> grade
    pub qrels: HashMap<String, HashMap<String, u32>>,
}

impl Dataset {
    /// The judged queries (the ones the figures average over).
    pub fn judged_queries(&self) -> impl Iterator<Item = &Query> {
        self.queries.iter().filter(|q| self.qrels.contains_key(&q.id))
    }

    /// One Markdown file per document: `memory/cranfield/<id>.md`, first line `# <title>`.
    pub fn write_workspace(&self, ws: &Path) -> anyhow::Result<()> {
        let docs_dir = ws.join("memory/cranfield");
        std::fs::create_dir_all(&docs_dir)?;
        for d in &self.docs {
            std::fs::write(docs_dir.join(format!("{}.md", d.id)), format!("# {}\n\n{}\n", d.title.trim(), d.text.trim()))?;
        }
        Ok(())
    }
}

pub fn load(dir: &Path) -> anyhow::Result<Dataset> {
    if !dir.join("docs.jsonl").exists() {
        bail!("{} has no docs.jsonl (pass --dataset; the project's data lives in ../shared/datasets/cranfield)", dir.display());
    }
    let read_lines = |name: &str| -> anyhow::Result<Vec<String>> {
        let text = std::fs::read_to_string(dir.join(name)).with_context(|| format!("reading {name}"))?;
        Ok(text.lines().filter(|l| !l.trim().is_empty()).map(str::to_string).collect())
    };
    let docs = read_lines("docs.jsonl")?.iter().map(|l| serde_json::from_str(l)).collect::<Result<_, _>>()?;
    let queries = read_lines("queries-dev.jsonl")?.iter().map(|l| serde_json::from_str(l)).collect::<Result<_, _>>()?;
    let mut qrels: HashMap<String, HashMap<String, u32>> = HashMap::new();
    for line in read_lines("qrels-dev.tsv")?.iter().skip(1) {
        let parts: Vec<&str> = line.split('\t').collect();
        if parts.len() >= 3 {
            qrels.entry(parts[0].into()).or_default().insert(parts[1].into(), parts[2].trim().parse()?);
        }
    }
    Ok(Dataset { docs, queries, qrels })
}

/// nDCG@k with gain 2^grade - 1.
pub fn ndcg(ranked: &[String], judged: &HashMap<String, u32>, k: usize) -> f64 {
    let gain = |g: u32| (2f64.powi(g as i32)) - 1.0;
    let dcg: f64 = ranked.iter().take(k).enumerate().map(|(i, d)| gain(*judged.get(d).unwrap_or(&0)) / ((i + 2) as f64).log2()).sum();
    let mut ideal: Vec<u32> = judged.values().copied().collect();
    ideal.sort_unstable_by(|a, b| b.cmp(a));
    let idcg: f64 = ideal.iter().take(k).enumerate().map(|(i, g)| gain(*g) / ((i + 2) as f64).log2()).sum();
    if idcg == 0.0 {
        0.0
    } else {
        dcg / idcg
    }
}

/// Average precision over the top k (relevant = grade > 0).
pub fn average_precision(ranked: &[String], judged: &HashMap<String, u32>, k: usize) -> f64 {
    let relevant = judged.values().filter(|g| **g > 0).count();
    if relevant == 0 {
        return 0.0;
    }
    let mut hits = 0;
    let mut sum = 0.0;
    for (i, d) in ranked.iter().take(k).enumerate() {
        if judged.get(d).is_some_and(|g| *g > 0) {
            hits += 1;
            sum += hits as f64 / (i + 1) as f64;
        }
    }
    sum / relevant as f64
}

pub fn recall(ranked: &[String], judged: &HashMap<String, u32>, k: usize) -> f64 {
    let relevant = judged.values().filter(|g| **g > 0).count();
    if relevant == 0 {
        return 0.0;
    }
    ranked.iter().take(k).filter(|d| judged.get(*d).is_some_and(|g| *g > 0)).count() as f64 / relevant as f64
}

/// The test model folder, when present.
pub fn default_model() -> Option<std::path::PathBuf> {
    let p = match std::env::var_os("MEMORY_TEST_MODEL") {
        Some(p) => std::path::PathBuf::from(p),
        None => std::path::PathBuf::from(std::env::var_os("HOME")?).join(".cache/memory-rs/models/all-MiniLM-L6-v2"),
    };
    p.join("model.safetensors").exists().then_some(p)
}

#[derive(Debug, Clone, Copy, serde::Serialize, serde::Deserialize)]
pub struct Scores {
    pub ndcg10: f64,
    pub map100: f64,
    pub recall100: f64,
    /// A reranked mode's reranking time per candidate (ms), over all its calls.
    pub rerank_ms_per_candidate: Option<f64>,
}

/// Average the three figures over the judged queries, given each query's ranked document ids (documents
/// de-duplicated, best chunk first). A judged query missing from `ranked` counts as an empty answer.
/// The in-process `local` provider over the model in `model`, if any.
pub fn local_embedder(model: Option<&Path>) -> anyhow::Result<Option<Arc<dyn memory_core::embedding::EmbeddingProvider>>> {
    let Some(m) = model else { return Ok(None) };
    let mut c = Config::default();
    c.memory.search.provider = "local".into();
    c.memory.search.local.model_path = Some(m.display().to_string());
    Ok(providers::from_config(&c)?)
}

pub fn score_rankings(data: &Dataset, ranked: &HashMap<String, Vec<String>>) -> Scores {
    let (mut n10, mut map, mut rec, mut n) = (0.0, 0.0, 0.0, 0);
    for q in data.judged_queries() {
        let judged = &data.qrels[&q.id];
        let empty = Vec::new();
        let r = ranked.get(&q.id).unwrap_or(&empty);
        n10 += ndcg(r, judged, 10);
        map += average_precision(r, judged, 100);
        rec += recall(r, judged, 100);
        n += 1;
    }
    let n = n.max(1) as f64;
    Scores { ndcg10: n10 / n, map100: map / n, recall100: rec / n, rerank_ms_per_candidate: None }
}

/// Hits' file stems in rank order, each document once.
pub fn dedup_stems(stems: impl IntoIterator<Item = String>) -> Vec<String> {
    let mut ranked: Vec<String> = Vec::new();
    for s in stems {
        if !ranked.contains(&s) {
            ranked.push(s);
        }
    }
    ranked
}

async fn evaluate(engine: &dyn MemoryBackend, data: &Dataset, verbose: bool, label: &str) -> anyhow::Result<Scores> {
    let (mut n10, mut map, mut rec, mut judged_queries) = (0.0, 0.0, 0.0, 0);
    for q in &data.queries {
        let Some(judged) = data.qrels.get(&q.id) else { continue };
        let r = engine.search(&SearchRequest { max_results: Some(100), min_score: Some(0.0), ..SearchRequest::new(q.text.clone()) }).await?;
        // Documents in rank order (a long document may contribute several chunks: keep its best).
        let mut ranked: Vec<String> = Vec::new();
        for hit in r.results {
            let stem = hit.path.rsplit('/').next().unwrap_or("").trim_end_matches(".md").to_string();
            if !ranked.contains(&stem) {
                ranked.push(stem);
            }
        }
        let (a, b, c) = (ndcg(&ranked, judged, 10), average_precision(&ranked, judged, 100), recall(&ranked, judged, 100));
        if verbose {
            println!("{label:<8} q{:<4} nDCG@10 {a:.3}  AP {b:.3}  R@100 {c:.3}  {}", q.id, q.text);
        }
        n10 += a;
        map += b;
        rec += c;
        judged_queries += 1;
    }
    let n = judged_queries.max(1) as f64;
    Ok(Scores { ndcg10: n10 / n, map100: map / n, recall100: rec / n, rerank_ms_per_candidate: None })
}

/// A reranker for the quality figures: its folder, how many candidates it reads, its weight in the fold.
pub struct RerankSetup {
    pub dir: std::path::PathBuf,
    pub candidates: usize,
    pub weight: f64,
}

pub async fn run(dir: &Path, verbose: bool, model: Option<&Path>, rerank: &[RerankSetup]) -> anyhow::Result<()> {
    let data = load(dir)?;
    let tmp = tempfile::tempdir()?;
    let ws = tmp.path().join("workspace");
    data.write_workspace(&ws)?;
    println!(
        "Cranfield dev: {} documents, {} judged queries, builtin engine{}",
        data.docs.len(),
        data.qrels.len(),
        model.map(|m| format!(", local model {}", m.display())).unwrap_or_default()
    );
    println!("{:<20} {:>9} {:>9} {:>11} {:>10}", "mode", "nDCG@10", "MAP@100", "Recall@100", "rr ms/cand");
    for (label, s) in builtin_scores(&data, &ws, &tmp.path().join("state"), verbose, model, rerank).await? {
        let cost = s.rerank_ms_per_candidate.map_or("-".to_string(), |ms| format!("{ms:.2}"));
        println!("{label:<20} {:>9.4} {:>9.4} {:>11.4} {cost:>10}", s.ndcg10, s.map100, s.recall100);
    }
    Ok(())
}

/// The builtin engine's figures per mode (keyword; with a model also vector and hybrid; with rerankers also
/// hybrid, or keyword without a model, reranked by each) on a Cranfield workspace already written to `ws`.
pub async fn builtin_scores(
    data: &Dataset,
    ws: &Path,
    state: &Path,
    verbose: bool,
    model: Option<&Path>,
    rerank: &[RerankSetup],
) -> anyhow::Result<Vec<(String, Scores)>> {
    let ws = ws.to_path_buf();
    let embedder = local_embedder(model)?;
    let rerankers: Vec<Arc<crate::locomo::Recording>> =
        rerank.iter().map(|r| crate::locomo::Recording::open(&r.dir)).collect::<anyhow::Result<_>>()?;
    // Vector and hybrid share one index (the weights are ranking settings, not part of the index identity);
    // keyword search without a provider has an index of its own, or each would rebuild the other's (and re-embed
    // every chunk) on every run with `--keep`.
    let mut modes: Vec<(String, f64, f64, Option<usize>)> = if embedder.is_some() {
        vec![("keyword".into(), 0.0, 1.0, None), ("vector".into(), 1.0, 0.0, None), ("hybrid".into(), 0.7, 0.3, None)]
    } else {
        vec![("keyword".into(), 0.0, 1.0, None)]
    };
    // One reranker keeps the labels earlier figures were printed with; several are named and counted.
    let one = rerank.len() == 1;
    for (i, r) in rerank.iter().enumerate() {
        let name = r.dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let tag = if one { "+rr".to_string() } else { format!("+{} {}", crate::locomo::short_name(&name), r.candidates) };
        modes.push(if embedder.is_some() { (format!("hybrid{tag}"), 0.7, 0.3, Some(i)) } else { (format!("kw{tag}"), 0.0, 1.0, Some(i)) });
    }
    let state = state.to_path_buf();
    let mut out = Vec::new();
    for (label, vw, tw, reranked_by) in modes {
        let keyword = label.starts_with('k');
        let reranker = reranked_by.map(|i| rerankers[i].clone());
        let cost_before = reranker.as_ref().map(|r| r.cost()).unwrap_or_default();
        let mut config = Config::default();
        if let Some(r) = reranked_by.map(|i| &rerank[i]) {
            let c = &mut config.memory.search.query.rerank;
            c.enabled = true;
            c.model_path = Some(r.dir.display().to_string());
            c.candidates = r.candidates;
            c.weight = r.weight;
            c.budget_ms = 60_000;
        }
        config.memory.search.query.min_score = 0.0;
        config.memory.search.query.hybrid.vector_weight = vw;
        crate::apply_ranking_profile(&mut config);
        config.memory.search.query.hybrid.text_weight = tw;
        let ctx = OpenContext::new(Arc::new(config), ws.clone(), if keyword { state.join("keyword") } else { state.clone() }, "quality")
            .with_embedder(if keyword { None } else { embedder.clone() })
            .with_reranker(reranker.clone().map(|r| r as Arc<dyn memory_core::rerank::Reranker>));
        let engine = BuiltinFactory.open_indexed(ctx).await?;
        let started = std::time::Instant::now();
        let report = engine.sync(SyncOptions::default()).await?;
        if report.changed_anything() {
            eprintln!(
                "({label}: indexed {} chunks, {} embedded, in {:.1} s)",
                report.chunks_written,
                report.chunks_embedded,
                started.elapsed().as_secs_f64()
            );
        }
        let mut s = evaluate(&engine, data, verbose, &label).await?;
        if let Some(r) = &reranker {
            let (ms, n) = r.cost();
            s.rerank_ms_per_candidate = Some((ms - cost_before.0) / (n - cost_before.1).max(1) as f64);
        }
        out.push((label, s));
        engine.close().await?;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metrics_on_a_small_example() {
        let judged: HashMap<String, u32> = [("a".to_string(), 2), ("b".to_string(), 1)].into();
        let perfect = vec!["a".to_string(), "b".to_string()];
        assert!((ndcg(&perfect, &judged, 10) - 1.0).abs() < 1e-12);
        let swapped = vec!["b".to_string(), "a".to_string()];
        assert!(ndcg(&swapped, &judged, 10) < 1.0);
        assert!((average_precision(&["x".into(), "a".into()], &judged, 100) - 0.25).abs() < 1e-12);
        assert_eq!(recall(&["a".into()], &judged, 100), 0.5);
    }
}
