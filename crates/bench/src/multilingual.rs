//! Retrieval quality on a bilingual (Chinese / English) agent memory: a workspace of notes and questions of five
//! kinds (Chinese paraphrases, English questions about Chinese notes, Chinese questions about English notes,
//! exact tokens, changed facts where the newer note is the answer), each asked of keyword search, hybrid with
//! all-MiniLM-L6-v2 and hybrid with multilingual-e5-small (and its vectors alone, for reference), through the
//! real builtin engine with the default ranking settings. Then Cranfield in the same run (keyword, vector and
//! hybrid with MiniLM) so a ranking change shows its effect on both.
//!
//! A question is answered when a note it names is the first result (and, in the second table, among the first
//! three).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{bail, Context};
use memory_builtin::BuiltinFactory;
use memory_core::registry::OpenContext;
use memory_core::{Config, MemoryBackend, SearchRequest, SyncOptions};
use serde::Deserialize;

#[derive(Deserialize)]
struct DevSet {
    notes: BTreeMap<String, String>,
    questions: Vec<Question>,
}

#[derive(Deserialize)]
struct Question {
    kind: String,
    query: String,
    relevant: Vec<String>,
}

/// The kinds in report order.
const KINDS: &[&str] = &["zh-paraphrase", "en-zh", "zh-en", "exact", "changed"];

/// The multilingual model folder, when present.
pub fn default_multilingual_model() -> Option<PathBuf> {
    let p = match std::env::var_os("MEMORY_TEST_MULTILINGUAL_MODEL") {
        Some(p) => PathBuf::from(p),
        None => PathBuf::from(std::env::var_os("HOME")?).join(".cache/memory-rs/models/multilingual-e5-small"),
    };
    p.join("model.safetensors").exists().then_some(p)
}

fn load(path: &Path) -> anyhow::Result<DevSet> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let set: DevSet = serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))?;
    for q in &set.questions {
        if !KINDS.contains(&q.kind.as_str()) {
            bail!("question {:?}: unknown kind {:?} (kinds: {})", q.query, q.kind, KINDS.join(", "));
        }
        if let Some(r) = q.relevant.iter().find(|r| !set.notes.contains_key(*r)) {
            bail!("question {:?}: relevant note {r} is not in the set", q.query);
        }
    }
    Ok(set)
}

fn write_workspace(set: &DevSet, ws: &Path) -> anyhow::Result<()> {
    for (path, text) in &set.notes {
        if Path::new(path).components().any(|c| !matches!(c, std::path::Component::Normal(_))) {
            bail!("note path {path} is not relative");
        }
        let p = ws.join(path);
        std::fs::create_dir_all(p.parent().unwrap_or(ws))?;
        if std::fs::read_to_string(&p).ok().as_deref() != Some(text.as_str()) {
            std::fs::write(p, text)?;
        }
    }
    Ok(())
}

/// Rank of the first relevant note (1-based) per question, `None` when not in the first 10.
async fn ranks(engine: &dyn MemoryBackend, set: &DevSet) -> anyhow::Result<Vec<Option<usize>>> {
    let mut out = Vec::new();
    for q in &set.questions {
        let r = engine.search(&SearchRequest { max_results: Some(10), min_score: None, ..SearchRequest::new(q.query.clone()) }).await?;
        let mut files: Vec<String> = Vec::new();
        for hit in r.results {
            if !files.contains(&hit.path) {
                files.push(hit.path);
            }
        }
        out.push(files.iter().position(|f| q.relevant.contains(f)).map(|i| i + 1));
    }
    Ok(out)
}

struct Mode {
    label: String,
    ranks: Vec<Option<usize>>,
    /// Chunks embedded and seconds spent indexing (with a model).
    indexing: Option<(usize, f64)>,
}

async fn run_mode(label: &str, set: &DevSet, ws: &Path, state: &Path, model: Option<&Path>, weights: Option<(f64, f64)>) -> anyhow::Result<Mode> {
    let mut config = Config::default();
    crate::apply_ranking_profile(&mut config);
    let embedder = crate::quality::local_embedder(model)?;
    if let Some((vw, tw)) = weights {
        config.memory.search.query.hybrid.vector_weight = vw;
        config.memory.search.query.hybrid.text_weight = tw;
    }
    let ctx = OpenContext::new(Arc::new(config), ws.to_path_buf(), state.to_path_buf(), "multilingual").with_embedder(embedder);
    let engine = BuiltinFactory.open_indexed(ctx).await?;
    let started = std::time::Instant::now();
    let report = engine.sync(SyncOptions::default()).await?;
    let secs = started.elapsed().as_secs_f64();
    let indexing = (report.chunks_embedded > 0).then_some((report.chunks_embedded, secs));
    let ranks = ranks(&engine, set).await?;
    engine.close().await?;
    Ok(Mode { label: label.to_string(), ranks, indexing })
}

/// A short name for a model folder or file in the tables: `e5` for multilingual-e5-small, `gemma` for
/// EmbeddingGemma, else its first 10 characters.
fn model_label(model: &Path) -> String {
    let name = model.file_name().map(|n| n.to_string_lossy().to_lowercase()).unwrap_or_default();
    if name.contains("e5") {
        "e5".into()
    } else if name.contains("gemma") {
        "gemma".into()
    } else {
        name.chars().take(10).collect()
    }
}

/// The questions of `kind` (all kinds: `None`) that `m` answered with a relevant note among its first `within`.
fn answered(set: &DevSet, m: &Mode, kind: Option<&str>, within: usize) -> usize {
    set.questions.iter().zip(&m.ranks).filter(|(q, _)| kind.is_none_or(|k| q.kind == k)).filter(|(_, r)| r.is_some_and(|r| r <= within)).count()
}

fn table(set: &DevSet, modes: &[Mode], within: usize) {
    print!("{:<14} {:>3}", "kind", "n");
    for m in modes {
        print!(" {:>16}", m.label);
    }
    println!();
    let count = |m: &Mode, kind: Option<&str>| answered(set, m, kind, within);
    for kind in KINDS.iter().copied().map(Some).chain([None]) {
        let n = set.questions.iter().filter(|q| kind.is_none_or(|k| q.kind == k)).count();
        print!("{:<14} {:>3}", kind.unwrap_or("total"), n);
        for m in modes {
            print!(" {:>16}", format!("{}/{n}", count(m, kind)));
        }
        println!();
    }
}

/// Each hybrid mode's questions answered first, per kind, against its legs that ran beside it
/// ([`crate::legs::of`]).
fn shortfalls(set: &DevSet, modes: &[Mode]) -> Vec<crate::legs::Shortfall> {
    let first = |m: &Mode, kind: &str| answered(set, m, Some(kind), 1) as f64;
    let mut out = Vec::new();
    for m in modes {
        let Some(legs) = crate::legs::of(&m.label) else { continue };
        for leg in modes.iter().filter(|l| legs.contains(&l.label)) {
            for kind in KINDS {
                crate::legs::compare(&mut out, kind, "answered first", (&m.label, first(m, kind)), (&leg.label, first(leg, kind)), 0);
            }
        }
    }
    out
}

pub async fn run(
    dataset: &Path,
    minilm: Option<&Path>,
    multilingual: &[PathBuf],
    cranfield: Option<&Path>,
    verbose: bool,
    keep: Option<&Path>,
) -> anyhow::Result<()> {
    let set = load(dataset)?;
    let tmp_dir = tempfile::tempdir()?;
    // With `keep`, indexes (and their embeddings) survive for the next run; the notes are rewritten each time
    // (unchanged content costs nothing to re-check).
    let tmp: &Path = keep.unwrap_or(tmp_dir.path());
    let ws = tmp.join("workspace");
    write_workspace(&set, &ws)?;
    println!(
        "bilingual set {}: {} notes, {} questions; builtin engine, ranking settings: {}",
        dataset.display(),
        set.notes.len(),
        set.questions.len(),
        crate::RANKING_PROFILE.get().map_or("default", String::as_str)
    );
    let mut modes = vec![run_mode("keyword", &set, &ws, &tmp.join("state-keyword"), None, None).await?];
    if let Some(m) = minilm {
        modes.push(run_mode("hybrid MiniLM", &set, &ws, &tmp.join("state-minilm"), Some(m), None).await?);
    }
    for m in multilingual {
        let name = model_label(m);
        let state = tmp.join(format!("state-{name}"));
        modes.push(run_mode(&format!("vector {name}"), &set, &ws, &state, Some(m), Some((1.0, 0.0))).await?);
        modes.push(run_mode(&format!("hybrid {name}"), &set, &ws, &state, Some(m), None).await?);
    }
    println!("\nanswered: a relevant note ranked first");
    table(&set, &modes, 1);
    println!("\nrelevant note in the first 3");
    table(&set, &modes, 3);
    println!();
    crate::legs::print(&shortfalls(&set, &modes), 0);
    for m in &modes {
        if let Some((chunks, secs)) = m.indexing {
            println!("({}: indexed {chunks} chunks in {secs:.1} s, {:.1} chunks/s)", m.label, chunks as f64 / secs.max(1e-9));
        }
    }
    if verbose {
        println!();
        for (i, q) in set.questions.iter().enumerate() {
            let cells: Vec<String> = modes.iter().map(|m| m.ranks[i].map_or("-".to_string(), |r| r.to_string())).collect();
            println!("{:<14} {:<40} {}", q.kind, q.query, cells.join(" "));
        }
    }
    if let Some(dir) = cranfield {
        let data = crate::quality::load(dir)?;
        let cws = tmp.join("cranfield");
        if !cws.is_dir() {
            data.write_workspace(&cws)?;
        }
        println!("\nCranfield dev ({} documents, {} judged queries), same run", data.docs.len(), data.qrels.len());
        println!("{:<8} {:>9} {:>9} {:>11}", "mode", "nDCG@10", "MAP@100", "Recall@100");
        for (label, s) in crate::quality::builtin_scores(&data, &cws, &tmp.join("state-cranfield"), false, minilm, &[]).await? {
            println!("{label:<8} {:>9.4} {:>9.4} {:>11.4}", s.ndcg10, s.map100, s.recall100);
        }
    }
    Ok(())
}
