//! Result mapping: qmd's hits (`qmd://collection/path` URIs, line ranges, snippets) as the engine's results,
//! with core's citations.

use memory_core::locks::LockExt;
use std::path::{Path, PathBuf};

use memory_core::ranking::snippet::{self, SnippetQuery};
use memory_core::types::{SearchResult, Source};

use super::Inner;
use crate::parse::{self, QmdHit};

impl Inner {
    /// A `qmd://collection/path` URI as the file on disk; `None` outside the registered collections or with `..`.
    pub(super) fn resolve_uri(&self, uri: &str) -> Option<PathBuf> {
        let (name, rel) = parse::split_qmd_uri(uri)?;
        let st = self.state.locked();
        let c = st.registered.iter().find(|c| c.name == name)?;
        if rel.split('/').any(|seg| seg == "..") {
            return None;
        }
        Some(c.root.join(rel))
    }

    /// One hit as a result: the file's key, its lines without blank edges (a transcript's JSONL lines for an
    /// exported session), the snippet within `limits.maxSnippetChars` chosen by core's rule
    /// ([`memory_core::ranking::snippet`]).
    pub(super) fn to_result(&self, hit: &QmdHit, terms: &SnippetQuery) -> Option<SearchResult> {
        let abs = self.resolve_uri(&hit.file).or_else(|| {
            // Not a qmd:// URI (e.g. --full-path output): take it as a path.
            let p = Path::new(&hit.file);
            (!hit.file.starts_with("qmd://")).then(|| if p.is_absolute() { p.to_path_buf() } else { self.workspace.join(p) })
        })?;
        let session_md = self
            .sessions
            .as_ref()
            .and_then(|_| parse::split_qmd_uri(&hit.file))
            .filter(|(c, _)| *c == crate::sessions::SESSIONS_COLLECTION)
            .map(|(_, rel)| rel.to_string());
        let path = match &session_md {
            Some(rel) => crate::sessions::transcript_key(rel),
            None => self.roots.key_for(&abs),
        };
        let lines: Vec<&str> = hit.text.split('\n').collect();
        let lead = lines.iter().take_while(|l| l.trim().is_empty()).count();
        let trail = if lead == lines.len() { 0 } else { lines.iter().rev().take_while(|l| l.trim().is_empty()).count() };
        let body = if lead == lines.len() { String::new() } else { lines[lead..lines.len() - trail].join("\n") };
        let (start, end) = match (hit.start_line, hit.line_count) {
            (Some(s), Some(c)) => {
                let covered = c.max(1).saturating_sub(trail.min(c.saturating_sub(1)));
                let start = s + lead.min(covered.saturating_sub(1));
                let end = (s + covered - 1).max(start);
                (start, end)
            }
            (Some(s), None) => (s, s + body.lines().count().max(1) - 1),
            (None, _) => {
                let l = hit.line.unwrap_or(1).max(1);
                (l, l)
            }
        };
        let shown = snippet::choose(&body, terms, self.cfg.limits.max_snippet_chars);
        let (start, end, source) = match (&session_md, &self.sessions) {
            (Some(rel), Some(s)) => {
                // Markdown lines of the export back to the transcript's JSONL lines.
                let map = crate::sessions::line_map(&s.out, rel).unwrap_or_default();
                let to_jsonl = |n: usize| map.get(n.saturating_sub(1)).copied().unwrap_or(n);
                (to_jsonl(start), to_jsonl(end), Source::Sessions)
            }
            _ => (start, end, Source::Memory),
        };
        // The snippet's own lines, when the body's lines are the file's (not a transcript's export).
        let shown_lines =
            (source == Source::Memory && hit.start_line.is_some()).then(|| (start + shown.first_line, (start + shown.last_line).min(end)));
        Some(SearchResult {
            snippet_start_line: shown_lines.map(|l| l.0),
            snippet_end_line: shown_lines.map(|l| l.1),
            ..SearchResult::new(source, path, start, end, hit.score, shown.text)
        })
    }
}

/// The first `max` characters of `s`.
pub(super) fn truncate_chars(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        Some((i, _)) => s[..i].to_string(),
        None => s.to_string(),
    }
}
