//! Trigger recall (OpenClaw 2026.9's lane-1 "trigger injection"): the entries of the curated files whose
//! `<!-- trigger: ... -->` phrases match an inbound message, scored as OpenClaw scores them and kept when strong.
//!
//! - Eligible entries: annotated lines ([`crate::chunking::annotations`]) of the root `MEMORY.md` / `memory.md`
//!   and `USER.md` only: daily notes, other notes and transcripts never qualify, whatever they say (a security
//!   property: unvetted text is never injected unasked). A project-tagged entry (not in `USER.md`, which is
//!   user-level) is eligible only while every one of its keys is active; an invalid tag never is.
//! - Trigger score of a phrase (its analysed terms against the message's): one term present 0.85; several,
//!   with `k` of `n` present, 0.8 k / n + 0.2 min(1, k / 2); none 0. An entry takes its best phrase.
//! - Relevance: the score of the entry's hit when the message is searched like a `memory_search` (keyword and
//!   vector paths, the active projects applied), 0..1; 0 when the entry is not among the best hits.
//! - Score = 0.8 x trigger + 0.2 x relevance; entries at or above [`RECALL_THRESHOLD`], best first (ties: path,
//!   line), at most [`RECALL_MAX_ENTRIES`].
//! - Asked for, the Project Memory list: `MEMORY.md`'s entries whose project keys are all active, most important
//!   first (OpenClaw builds its per-turn Project Memory block from them).

use super::*;
use crate::chunking::annotations::entries;
use crate::citation::citation;
use crate::discovery::{ROOT_FILE_NAMES, USER_FILE};
use crate::ranking::project::{active_keys, is_project_scoped_file};

/// The score an entry needs to be injected.
pub const RECALL_THRESHOLD: f64 = 0.72;
/// At most this many entries are injected per message.
pub const RECALL_MAX_ENTRIES: usize = 3;
/// The message is read up to this many characters.
pub const MAX_MESSAGE_CHARS: usize = 8000;
/// Hits of the relevance search (OpenClaw's trigger candidate search asks for 24).
const RELEVANCE_HITS: usize = 24;
/// Chunks read per curated file.
const MAX_FILE_CHUNKS: usize = 10_000;

/// The trigger score of one phrase against the message's terms.
pub fn phrase_score(phrase: &str, message_terms: &HashSet<String>) -> f64 {
    let terms = query_terms(phrase);
    match terms.len() {
        0 => 0.0,
        1 => {
            if message_terms.contains(&terms[0]) {
                0.85
            } else {
                0.0
            }
        }
        n => {
            let k = terms.iter().filter(|t| message_terms.contains(*t)).count();
            if k == 0 {
                return 0.0;
            }
            (0.8 * k as f64 / n as f64 + 0.2 * (k as f64 / 2.0).min(1.0)).min(1.0)
        }
    }
}

/// The analysed terms of a message (all of them, stop words included: a phrase of stop words only may match).
pub fn message_terms(message: &str) -> HashSet<String> {
    let mut out = HashSet::new();
    crate::analysis::each_document_term(message, &mut |t| {
        out.insert(t.to_string());
    });
    out
}

/// The message cut to [`MAX_MESSAGE_CHARS`] characters.
fn bounded_message(message: &str) -> &str {
    match message.char_indices().nth(MAX_MESSAGE_CHARS) {
        Some((i, _)) => &message[..i],
        None => message,
    }
}

impl IndexedBackend {
    pub(super) async fn recall_inner(&self, request: &RecallRequest) -> Result<RecallResponse> {
        let message = bounded_message(request.message.trim());
        let project_limit = request.project_entries.map(|n| n.min(MAX_PROJECT_ENTRIES));
        if message.is_empty() && project_limit.is_none() {
            return Err(MemoryError::InvalidInput("message is empty".into()));
        }
        let active = active_keys(&request.active_project_keys);
        let mut response = RecallResponse { threshold: RECALL_THRESHOLD, ..Default::default() };
        if request.active_project_keys.len() > active.len() {
            response.warnings.push(format!(
                "{} active project keys given; {} read (invalid or duplicate keys dropped, at most {})",
                request.active_project_keys.len(),
                active.len(),
                crate::ranking::project::MAX_ACTIVE_PROJECTS
            ));
        }
        let hits = if message.is_empty() {
            // Only project entries: the index is brought in step as a search would.
            let stale = self.freshen(&mut response.warnings, tokio::time::Instant::now() + super::patience::EMBED_WAIT).await?;
            drop(stale);
            None
        } else {
            // The relevance leg: the message searched as memory_search would (this also brings the index in step).
            let search = SearchRequest {
                max_results: Some(RELEVANCE_HITS),
                min_score: Some(0.0),
                sources: vec![Source::Memory],
                active_project_keys: active.clone(),
                ..SearchRequest::new(message)
            };
            let hits = self.search(&search).await?;
            response.warnings.extend(hits.warnings.iter().cloned());
            response.mode = hits.mode.clone();
            Some(hits)
        };

        // The curated entries, once per line (chunks overlap).
        let store = self.store();
        let mut lines: std::collections::BTreeMap<(String, usize), crate::chunking::annotations::Entry> = Default::default();
        for path in ROOT_FILE_NAMES.into_iter().chain([USER_FILE]) {
            for chunk in store.file_chunks(Source::Memory, path, MAX_FILE_CHUNKS).await? {
                for e in entries(&chunk.text, chunk.start_line) {
                    lines.entry((path.to_string(), e.line)).or_insert(e);
                }
            }
        }

        if let Some(limit) = project_limit {
            response.project_entries = project_entries(&lines, &active, limit);
        }
        if let Some(hits) = hits {
            let (entries, candidates) = trigger_matches(&lines, &active, message, &hits);
            response.entries = entries;
            response.candidates = candidates;
        }
        debug!(candidates = response.candidates, injected = response.entries.len(), projects = response.project_entries.len(), "trigger recall");
        Ok(response)
    }
}

/// `MEMORY.md`'s entries whose project keys are all active (none without active keys), most important first
/// (then path, line), at most `limit`.
fn project_entries(
    lines: &std::collections::BTreeMap<(String, usize), crate::chunking::annotations::Entry>,
    active: &[String],
    limit: usize,
) -> Vec<ProjectEntry> {
    if active.is_empty() {
        return Vec::new();
    }
    let mut out: Vec<ProjectEntry> = lines
        .iter()
        .filter(|((path, _), e)| ROOT_FILE_NAMES.contains(&path.as_str()) && e.annotations.projects_all_active(active))
        .map(|((path, line), e)| ProjectEntry {
            path: path.clone(),
            line: *line,
            text: e.text.clone(),
            projects: e.annotations.projects.clone(),
            importance: e.annotations.importance,
            citation: citation(path, *line, *line),
        })
        .collect();
    out.sort_by(|a, b| b.importance.unwrap_or(0).cmp(&a.importance.unwrap_or(0)).then_with(|| a.path.cmp(&b.path)).then(a.line.cmp(&b.line)));
    out.truncate(limit);
    out
}

/// The eligible trigger entries scored against the message and its hits; the strong ones (best first, at most
/// [`RECALL_MAX_ENTRIES`]) and how many were eligible.
fn trigger_matches(
    lines: &std::collections::BTreeMap<(String, usize), crate::chunking::annotations::Entry>,
    active: &[String],
    message: &str,
    hits: &SearchResponse,
) -> (Vec<RecallEntry>, usize) {
    let terms = message_terms(message);
    let mut candidates = 0;
    let mut out = Vec::new();
    for ((path, line), e) in lines {
        let (path, line) = (path.clone(), *line);
        let a = &e.annotations;
        if a.triggers.is_empty() {
            continue;
        }
        if is_project_scoped_file(Source::Memory, &path) && a.is_project_tagged() && !a.projects_all_active(active) {
            continue;
        }
        candidates += 1;
        let Some((trigger, trigger_score)) = a.triggers.iter().map(|p| (p, phrase_score(p, &terms))).max_by(|x, y| x.1.total_cmp(&y.1)) else {
            continue;
        };
        let relevance = hits
            .results
            .iter()
            .filter(|h| h.source == Source::Memory && h.path == path && h.start_line <= line && line <= h.end_line)
            .map(|h| h.score)
            .fold(0.0_f64, f64::max)
            .clamp(0.0, 1.0);
        let score = 0.8 * trigger_score + 0.2 * relevance;
        if score >= RECALL_THRESHOLD {
            let projects = if is_project_scoped_file(Source::Memory, &path) { a.projects.clone() } else { Vec::new() };
            out.push(RecallEntry {
                citation: citation(&path, line, line),
                path,
                line,
                text: e.text.clone(),
                score,
                trigger_score,
                relevance,
                trigger: trigger.clone(),
                projects,
                importance: a.importance,
            });
        }
    }
    out.sort_by(|a, b| b.score.total_cmp(&a.score).then_with(|| a.path.cmp(&b.path)).then(a.line.cmp(&b.line)));
    out.truncate(RECALL_MAX_ENTRIES);
    (out, candidates)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn phrase_scores_follow_openclaw() {
        let m = message_terms("How should I do the gateway setup on the new networks?");
        assert_eq!(phrase_score("gateway", &m), 0.85);
        assert!((phrase_score("Gateway Setup", &m) - 1.0).abs() < 1e-9);
        assert_eq!(phrase_score("kubernetes", &m), 0.0);
        assert!((phrase_score("network safety", &m) - (0.4 + 0.1)).abs() < 1e-9);
        assert_eq!(phrase_score("the", &m), 0.85, "a stop-word-only phrase still matches");
        assert_eq!(phrase_score("", &m), 0.0);
        let cjk = message_terms("我们今天要部署网关吗？");
        assert_eq!(phrase_score("部署网关", &cjk), 1.0);
        assert_eq!(phrase_score("部署", &cjk), 0.85);
        assert_eq!(phrase_score("数据库", &cjk), 0.0);
    }

    #[test]
    fn message_is_bounded_on_a_char_boundary() {
        let long = "网".repeat(MAX_MESSAGE_CHARS + 5);
        assert_eq!(bounded_message(&long).chars().count(), MAX_MESSAGE_CHARS);
        assert_eq!(bounded_message("short"), "short");
    }
}
