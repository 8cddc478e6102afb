//! The LoCoMo-style dataset as the benchmark reads it: questions with their evidence turns, from
//! `questions.jsonl`. Apart from the runs so the scoring and the cost measurements read the same questions.

use std::path::Path;

use anyhow::{bail, Context};
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

/// The day a conversation's questions are asked on: its last session's, the newest daily log of its workspace
/// (`memory/YYYY-MM-DD.md`). What "last year" or "in June" in a question means is counted from it.
pub fn asked_on(ws: &Path) -> Option<String> {
    let names = std::fs::read_dir(ws.join("memory")).ok()?;
    names
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| memory_core::discovery::date_from_path(n).is_some())
        .map(|n| n[..10].to_string())
        .max()
}
