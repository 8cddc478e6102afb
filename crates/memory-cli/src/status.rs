//! `memory status [--deep]`: the engine's status plus what the host knows (config file, how the workspace was
//! chosen, index size on disk, watch settings); `--deep` probes the engine (a real search, a read of the whole
//! index for damage, which is repaired) and the embedding provider (a real embedding) and reports what happened
//! and how long it took.

use std::path::Path;
use std::time::Instant;

use memory_core::{Config, MemoryBackend, SearchRequest, Status};
use serde_json::{json, Map, Value};

use crate::openclaw::WorkspaceFrom;

pub struct HostInfo<'a> {
    pub config: &'a Config,
    pub config_path: Option<&'a Path>,
    pub workspace_from: WorkspaceFrom,
    pub provider_note: Option<&'a str>,
    /// The engine's second stage, when `memory.search.query.rerank` is on.
    pub reranker: Option<&'a dyn memory_core::rerank::Reranker>,
}

/// Bytes of the index on disk: the file or folder at `location` (SQLite's -wal / -shm included).
pub fn index_bytes(location: &str) -> Option<u64> {
    let p = Path::new(location);
    let meta = std::fs::metadata(p).ok()?;
    if meta.is_dir() {
        return Some(dir_bytes(p));
    }
    let mut total = meta.len();
    for suffix in ["-wal", "-shm"] {
        if let Ok(m) = std::fs::metadata(format!("{location}{suffix}")) {
            total += m.len();
        }
    }
    Some(total)
}

fn dir_bytes(p: &Path) -> u64 {
    let Ok(rd) = std::fs::read_dir(p) else { return 0 };
    rd.flatten()
        .map(|e| match e.file_type() {
            Ok(t) if t.is_dir() => dir_bytes(&e.path()),
            Ok(t) if t.is_file() => e.metadata().map_or(0, |m| m.len()),
            _ => 0,
        })
        .sum()
}

/// Status as JSON: the engine's fields (wire names) and the host's.
pub async fn collect(engine: &dyn MemoryBackend, host: &HostInfo<'_>, deep: bool) -> anyhow::Result<(Status, Value)> {
    let status = engine.status().await?;
    let mut v = serde_json::to_value(&status)?;
    let obj = v.as_object_mut().expect("status is an object");
    let sync = &host.config.memory.search.sync;
    obj.insert("configPath".into(), host.config_path.map(|p| p.display().to_string()).into());
    obj.insert("workspaceFrom".into(), serde_json::to_value(host.workspace_from)?);
    obj.insert("searchEnabled".into(), host.config.memory.search.enabled.into());
    obj.insert("providerNote".into(), host.provider_note.into());
    obj.insert("reranker".into(), reranker_json(host));
    let warnings: Vec<Value> = host.config.warnings.iter().map(|w| json!({ "key": w.key, "message": w.message })).collect();
    obj.insert("configWarnings".into(), Value::Array(warnings));
    if let Some(bytes) = status.index_path.as_deref().and_then(index_bytes) {
        obj.insert("indexBytes".into(), bytes.into());
    }
    obj.insert(
        "sync".into(),
        json!({ "watch": sync.watch, "watchDebounceMs": sync.watch_debounce_ms, "intervalMinutes": sync.interval_minutes, "onSearch": sync.on_search }),
    );
    if deep {
        let mut probes = probe(engine, host.config).await;
        if let (Some(rr), Value::Object(p)) = (host.reranker, &mut probes) {
            p.insert("reranker".into(), probe_reranker(rr, host.config).await);
        }
        obj.insert("deep".into(), probes);
    }
    Ok((status, v))
}

/// The second stage as configured, and whether it can run: `null` when reranking is off.
fn reranker_json(host: &HostInfo<'_>) -> Value {
    let Some(rr) = host.reranker else { return Value::Null };
    let r = &host.config.memory.search.query.rerank;
    json!({ "model": rr.id(), "candidates": r.candidates, "budgetMs": r.budget_ms, "weight": r.weight, "unavailable": rr.unavailable() })
}

/// A real reranking of two passages: the weights load (a damaged file is found here, not by the next search).
async fn probe_reranker(rr: &dyn memory_core::rerank::Reranker, config: &Config) -> Value {
    let started = Instant::now();
    let deadline = started + std::time::Duration::from_millis(config.memory.search.query.rerank.budget_ms.max(10_000));
    let passages = ["The memory status probe reads this line.".to_string(), "An unrelated line about the weather.".to_string()];
    let ms = || started.elapsed().as_secs_f64() * 1000.0;
    match rr.score("memory status probe", &passages, deadline).await {
        Ok(logits) if logits.len() == passages.len() => json!({ "ok": true, "model": rr.id(), "ms": ms() }),
        Ok(logits) => {
            json!({ "ok": false, "model": rr.id(), "error": format!("{} scores for {} passages", logits.len(), passages.len()), "ms": ms() })
        }
        Err(e) => json!({ "ok": false, "model": rr.id(), "error": e.to_string(), "ms": ms() }),
    }
}

/// Run a real search and a real embedding.
async fn probe(engine: &dyn MemoryBackend, config: &Config) -> Value {
    let mut out = Map::new();
    let started = Instant::now();
    let search = match engine.search(&SearchRequest { max_results: Some(1), min_score: Some(0.0), ..SearchRequest::new("memory") }).await {
        Ok(r) => {
            json!({ "ok": true, "ms": started.elapsed().as_secs_f64() * 1000.0, "results": r.results.len(), "mode": r.mode, "warnings": r.warnings })
        }
        Err(e) => json!({ "ok": false, "ms": started.elapsed().as_secs_f64() * 1000.0, "error": e.to_string(), "kind": e.kind() }),
    };
    out.insert("search".into(), search);
    // The whole index read once: damage no search has met yet is found (and repaired) here.
    let started = Instant::now();
    let integrity = match engine.verify().await {
        Ok(None) => json!({ "ok": true, "ms": started.elapsed().as_secs_f64() * 1000.0 }),
        Ok(Some(repaired)) => json!({ "ok": false, "repaired": true, "note": repaired, "ms": started.elapsed().as_secs_f64() * 1000.0 }),
        Err(e) => json!({ "ok": false, "repaired": false, "error": e.to_string(), "kind": e.kind() }),
    };
    out.insert("integrity".into(), integrity);
    let embed = match memory_host::embedder(config) {
        Ok(None) => json!({ "ok": true, "provider": null, "note": "keyword-only: no embedding provider configured" }),
        Ok(Some(p)) => {
            let started = Instant::now();
            match p.embed_query("memory status probe").await {
                Ok(v) => {
                    json!({ "ok": true, "provider": p.id(), "model": p.model(), "dimensions": v.len(), "ms": started.elapsed().as_secs_f64() * 1000.0 })
                }
                Err(e) => {
                    json!({ "ok": false, "provider": p.id(), "model": p.model(), "error": e.to_string(), "ms": started.elapsed().as_secs_f64() * 1000.0 })
                }
            }
        }
        Err(e) => json!({ "ok": false, "error": e.to_string() }),
    };
    out.insert("embeddings".into(), embed);
    Value::Object(out)
}

/// Text lines for people, after the engine's own status lines.
pub fn print_host(out: &mut dyn std::io::Write, v: &Value) -> anyhow::Result<()> {
    if let Some(b) = v.get("indexBytes").and_then(Value::as_u64) {
        writeln!(out, "Index size: {:.1} MiB", b as f64 / (1024.0 * 1024.0))?;
    }
    match v.get("configPath").and_then(Value::as_str) {
        Some(p) => writeln!(out, "Config:     {p}")?,
        None => writeln!(out, "Config:     defaults (no config file)")?,
    }
    if v.get("searchEnabled") == Some(&Value::Bool(false)) {
        writeln!(out, "Search:     turned off for this agent (memorySearch.enabled: false); memory tools are off")?;
    }
    if let Some(note) = v.get("providerNote").and_then(Value::as_str) {
        writeln!(out, "Embeddings: {note}")?;
    }
    let r = &v["reranker"];
    if let Some(model) = r["model"].as_str() {
        match r["unavailable"].as_str() {
            Some(why) => writeln!(out, "Reranking:  UNAVAILABLE ({why}); searches answer in first-stage order")?,
            None => writeln!(out, "Reranking:  {model}, {} candidates, budget {} ms, weight {}", r["candidates"], r["budgetMs"], r["weight"])?,
        }
    }
    for w in v.get("configWarnings").and_then(Value::as_array).into_iter().flatten() {
        writeln!(out, "Config key: {} ({})", w["key"].as_str().unwrap_or("?"), w["message"].as_str().unwrap_or(""))?;
    }
    if v.get("rebuildPending") == Some(&Value::Bool(true)) {
        writeln!(out, "Rebuild:    pending (the index identity changed; the next sync rebuilds it beside the live one)")?;
    }
    if let Some(d) = v.get("deep") {
        let s = &d["search"];
        if s["ok"] == true {
            writeln!(out, "Probe:      search ok in {:.1} ms ({} mode)", s["ms"].as_f64().unwrap_or(0.0), s["mode"].as_str().unwrap_or("?"))?;
        } else {
            writeln!(out, "Probe:      search FAILED: {}", s["error"].as_str().unwrap_or("?"))?;
        }
        let i = &d["integrity"];
        match (i["ok"].as_bool(), i["repaired"].as_bool()) {
            (Some(true), _) => writeln!(out, "Probe:      index read whole, no damage ({:.1} ms)", i["ms"].as_f64().unwrap_or(0.0))?,
            (_, Some(true)) => writeln!(out, "Probe:      {}", i["note"].as_str().unwrap_or("?"))?,
            _ => writeln!(out, "Probe:      index check FAILED: {}", i["error"].as_str().unwrap_or("?"))?,
        }
        let e = &d["embeddings"];
        match (e["ok"].as_bool(), e["provider"].as_str()) {
            (Some(true), Some(p)) => {
                writeln!(out, "Probe:      embeddings ok ({p}, {} dims) in {:.1} ms", e["dimensions"], e["ms"].as_f64().unwrap_or(0.0))?;
            }
            (Some(true), None) => writeln!(out, "Probe:      no embedding provider (keyword only)")?,
            _ => writeln!(out, "Probe:      embeddings FAILED: {}", e["error"].as_str().unwrap_or("?"))?,
        }
        let r = &d["reranker"];
        match r["ok"].as_bool() {
            Some(true) => {
                writeln!(out, "Probe:      reranking ok ({}) in {:.1} ms", r["model"].as_str().unwrap_or("?"), r["ms"].as_f64().unwrap_or(0.0))?;
            }
            Some(false) => writeln!(out, "Probe:      reranking FAILED: {}", r["error"].as_str().unwrap_or("?"))?,
            None => {}
        }
    }
    Ok(())
}
