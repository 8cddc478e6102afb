//! Checking one answer against a step's expectations, and the invariants every answer must hold.

use std::path::Path;

use memory_contract::{Capabilities, GetResponse, MemoryError, SearchRequest, SearchResponse, Status};

use crate::fixture::{Expect, ExpectError};

/// The largest snippet an engine may return (OpenClaw's 700 characters), not counting a `Source:` citation line.
pub const SNIPPET_MAX_CHARS: usize = 700;

/// Distinct result paths in order of first appearance: what ranking expectations compare.
pub fn ranking(resp: &SearchResponse) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for r in &resp.results {
        if !out.contains(&r.path) {
            out.push(r.path.clone());
        }
    }
    out
}

/// A readable listing of the results, for failure messages.
pub fn describe_results(resp: &SearchResponse) -> String {
    if resp.results.is_empty() {
        return "      (no results)\n".into();
    }
    let mut s = String::new();
    for (i, r) in resp.results.iter().enumerate() {
        let mut parts = format!("score {:.4}", r.score);
        if let Some(t) = r.text_score {
            parts.push_str(&format!(", text {t:.4}"));
        }
        if let Some(v) = r.vector_score {
            parts.push_str(&format!(", vector {v:.4}"));
        }
        let snip: String = r.snippet.chars().take(70).collect::<String>().replace('\n', " ");
        s.push_str(&format!("      {}. {} L{}-{} ({parts}) {snip:?}\n", i + 1, r.path, r.start_line, r.end_line));
    }
    if let Some(m) = &resp.mode {
        s.push_str(&format!("      mode: {m}\n"));
    }
    for w in &resp.warnings {
        s.push_str(&format!("      warning: {w}\n"));
    }
    s
}

/// The snake_case name of an error's kind (`refused`, `invalid_input`...).
pub fn kind_name(e: &MemoryError) -> String {
    serde_json::to_value(e.kind()).ok().and_then(|v| v.as_str().map(str::to_string)).unwrap_or_default()
}

/// What differs between the error a case expects and the one the engine gave (empty: it matches).
pub fn check_error(expected: &ExpectError, actual: &MemoryError) -> Vec<String> {
    let mut f = Vec::new();
    let kind = kind_name(actual);
    if kind != expected.kind {
        f.push(format!("error kind: expected `{}`, got `{kind}` ({actual})", expected.kind));
    }
    let msg = actual.to_string();
    for c in &expected.contains {
        if !msg.contains(c.as_str()) {
            f.push(format!("error message {msg:?} does not contain {c:?}"));
        }
    }
    f
}

/// Check a search answer against the expectations.
pub fn check_search(e: &Expect, resp: &SearchResponse) -> Vec<String> {
    let mut f = Vec::new();
    let rank = ranking(resp);
    let pos = |p: &str| rank.iter().position(|x| x == p);
    if let Some(first) = &e.first {
        if rank.first() != Some(first) {
            f.push(format!("first: expected {first}, got {}", rank.first().map_or("(nothing)", String::as_str)));
        }
    }
    if let Some(top) = &e.top {
        if rank.len() < top.len() || rank[..top.len()] != top[..] {
            f.push(format!("top: expected the ranking to start with {top:?}, got {rank:?}"));
        }
    }
    for (a, b) in &e.before {
        match (pos(a), pos(b)) {
            (Some(i), Some(j)) if i < j => {}
            (Some(_), Some(_)) => f.push(format!("before: expected {a} above {b}, got {rank:?}")),
            _ => f.push(format!("before: expected both {a} and {b} in the results, got {rank:?}")),
        }
    }
    if let Some(w) = &e.within {
        for p in &w.paths {
            if pos(p).is_none_or(|i| i >= w.n) {
                f.push(format!("within: expected {p} among the first {} paths, got {rank:?}", w.n));
            }
        }
    }
    for p in &e.contains {
        if pos(p).is_none() {
            f.push(format!("contains: expected {p} in the results, got {rank:?}"));
        }
    }
    for p in &e.excludes {
        if pos(p).is_some() {
            f.push(format!("excludes: {p} must not be in the results, got {rank:?}"));
        }
    }
    if let Some(set) = &e.set {
        let mut want = set.clone();
        want.sort();
        let mut got = rank.clone();
        got.sort();
        if want != got {
            f.push(format!("set: expected exactly {want:?}, got {got:?}"));
        }
    }
    match e.empty {
        Some(true) if !resp.results.is_empty() => f.push(format!("empty: expected no results, got {rank:?}")),
        Some(false) if resp.results.is_empty() => f.push("empty: expected some results, got none".into()),
        _ => {}
    }
    if let Some(n) = e.max_count {
        if resp.results.len() > n {
            f.push(format!("maxCount: expected at most {n} results, got {}", resp.results.len()));
        }
    }
    if let Some(s) = &e.snippet_contains {
        match resp.results.first() {
            Some(r) if r.snippet.contains(s.as_str()) => {}
            Some(r) => f.push(format!("snippetContains: the first snippet {:?} does not contain {s:?}", r.snippet)),
            None => f.push(format!("snippetContains: expected a first result containing {s:?}, got none")),
        }
    }
    if let Some(s) = &e.no_snippet_contains {
        for r in &resp.results {
            if r.snippet.contains(s.as_str()) {
                f.push(format!("noSnippetContains: {} L{}-{} still shows {s:?}", r.path, r.start_line, r.end_line));
            }
        }
    }
    if let Some(mode) = &e.citations {
        if resp.results.is_empty() {
            f.push("citations: expected results to check".into());
        }
        for r in &resp.results {
            let want = citation(&r.path, r.start_line, r.end_line);
            match mode.as_str() {
                "present" | "sourceLine" => {
                    if r.citation.as_deref() != Some(want.as_str()) {
                        f.push(format!("citations: {} L{}-{}: expected citation {want:?}, got {:?}", r.path, r.start_line, r.end_line, r.citation));
                    }
                    let line = format!("Source: {want}");
                    let has_line = r.snippet.trim_end().ends_with(&line);
                    if mode == "sourceLine" && !has_line {
                        f.push(format!("citations: snippet of {} does not end with {line:?}", r.path));
                    }
                    if mode == "present" && has_line {
                        f.push(format!("citations: snippet of {} has a Source line, expected none", r.path));
                    }
                }
                "absent" => {
                    if r.citation.is_some() || r.snippet.contains("\nSource: ") {
                        f.push(format!("citations: expected none on {}, got {:?}", r.path, r.citation));
                    }
                }
                other => f.push(format!("citations: unknown expectation {other:?} (present, sourceLine, absent)")),
            }
        }
    }
    f
}

/// `path#Lstart-Lend`, or `path#Ln` for one line, as OpenClaw cites. Written here, not taken from
/// the contract's `citation::citation`: the suite's expectation must not follow the code it checks.
pub fn citation(path: &str, start: usize, end: usize) -> String {
    if start == end {
        format!("{path}#L{start}")
    } else {
        format!("{path}#L{start}-L{end}")
    }
}

/// What every search answer must hold, whatever the case expects.
pub fn search_invariants(req: &SearchRequest, default_max: usize, resp: &SearchResponse, workspace: &Path) -> Vec<String> {
    let mut f = Vec::new();
    let max = req.max_results.unwrap_or(default_max);
    if resp.results.len() > max {
        f.push(format!("invariant: {} results returned, maxResults is {max}", resp.results.len()));
    }
    for r in &resp.results {
        let at = format!("{} L{}-{}", r.path, r.start_line, r.end_line);
        if r.start_line < 1 || r.end_line < r.start_line {
            f.push(format!("invariant: {at}: line range must be 1-based with start <= end"));
        }
        if !r.score.is_finite() {
            f.push(format!("invariant: {at}: score {} is not finite", r.score));
        }
        if r.vector_score.is_some_and(|v| !v.is_finite()) || r.text_score.is_some_and(|v| !v.is_finite()) {
            f.push(format!("invariant: {at}: vector/text score is not finite"));
        }
        let body = match r.snippet.rfind("\nSource: ") {
            Some(i) => &r.snippet[..i],
            None => r.snippet.as_str(),
        };
        let n = body.chars().count();
        if n > SNIPPET_MAX_CHARS {
            f.push(format!("invariant: {at}: snippet has {n} characters, the cap is {SNIPPET_MAX_CHARS}"));
        }
        if r.snippet.trim().is_empty() {
            f.push(format!("invariant: {at}: empty snippet"));
        }
        if let Some(c) = &r.citation {
            let want = citation(&r.path, r.start_line, r.end_line);
            if *c != want {
                f.push(format!("invariant: {at}: citation {c:?} does not match the result (expected {want:?})"));
            }
        }
        let p = Path::new(&r.path);
        let abs = if p.is_absolute() { p.to_path_buf() } else { workspace.join(p) };
        if r.path.split('/').any(|c| c == "..") || !abs.is_file() {
            f.push(format!("invariant: {at}: result path is not an existing file of the workspace (stale index?)"));
        }
        if !req.sources.is_empty() && !req.sources.contains(&r.source) {
            f.push(format!("invariant: {at}: source {:?} was not asked for", r.source));
        }
    }
    f
}

/// What an explained search (`explained`, the same request as `plain` with `explain`) must hold: the same results,
/// an explanation, every result among its hits at its place, and each hit's factors giving its score.
pub fn explanation_invariants(plain: &SearchResponse, explained: &SearchResponse) -> Vec<String> {
    let mut f = Vec::new();
    let at = |r: &memory_contract::SearchResult| (r.source, r.path.clone(), r.start_line, r.end_line);
    let same = plain.results.len() == explained.results.len()
        && plain.results.iter().zip(&explained.results).all(|(a, b)| at(a) == at(b) && (a.score - b.score).abs() <= 1e-6 && a.snippet == b.snippet);
    if !same {
        f.push(format!("explain: the explained search answered other results ({} vs {})", explained.results.len(), plain.results.len()));
    }
    let Some(e) = explained.explanation.as_deref() else {
        f.push("explain: an engine that declares `explain` answered no explanation".into());
        return f;
    };
    for (i, r) in explained.results.iter().enumerate() {
        if !e.hits.iter().any(|h| h.result == Some(i + 1) && h.path == r.path && h.start_line == r.start_line && (h.score - r.score).abs() <= 1e-9) {
            f.push(format!("explain: result {} ({} L{}) is not among the explained hits at its place", i + 1, r.path, r.start_line));
        }
    }
    for h in &e.hits {
        let factors = (h.merged + h.recency + h.time_window + h.sentence) * h.decay * h.importance * h.project + h.rerank.unwrap_or(0.0);
        if (factors - h.score).abs() > 1e-9 * h.score.abs().max(1.0) {
            f.push(format!("explain: {} L{}: the factors give {factors}, the score is {}", h.path, h.start_line, h.score));
        }
        if h.verdict.kept() != h.result.is_some() {
            f.push(format!("explain: {} L{}: verdict {:?} but result {:?}", h.path, h.start_line, h.verdict, h.result));
        }
    }
    f
}

/// What differs between a case's expectation of a `memory_get` and the answer.
pub fn check_get(e: &Expect, r: &GetResponse) -> Vec<String> {
    let mut f = Vec::new();
    macro_rules! eq {
        ($field:ident, $name:literal) => {
            if let Some(want) = &e.$field {
                if *want != r.$field {
                    f.push(format!("{}: expected {:?}, got {:?}", $name, want, r.$field));
                }
            }
        };
    }
    eq!(text, "text");
    eq!(path, "path");
    eq!(from, "from");
    eq!(lines, "lines");
    eq!(total_lines, "totalLines");
    eq!(missing, "missing");
    eq!(truncated, "truncated");
    if let Some(s) = &e.text_contains {
        if !r.text.contains(s.as_str()) {
            f.push(format!("textContains: {:?} not in {:?}", s, preview(&r.text)));
        }
    }
    if let Some(s) = &e.note_contains {
        if !r.note.as_deref().is_some_and(|n| n.contains(s.as_str())) {
            f.push(format!("noteContains: expected a note containing {s:?}, got {:?}", r.note));
        }
    }
    f
}

/// What every memory_get answer must hold.
pub fn get_invariants(r: &GetResponse) -> Vec<String> {
    let mut f = Vec::new();
    let n = if r.text.is_empty() { 0 } else { r.text.lines().count() };
    if r.lines != n && !(r.truncated && r.lines == 1) {
        f.push(format!("invariant: `lines` is {} but the text has {n} lines", r.lines));
    }
    if r.lines > 0 && (r.from < 1 || r.from + r.lines - 1 > r.total_lines) {
        f.push(format!("invariant: lines {}..{} are outside the file's {} lines", r.from, r.from + r.lines - 1, r.total_lines));
    }
    if r.missing && !r.text.is_empty() {
        f.push("invariant: a missing file must read as empty text".into());
    }
    if r.truncated && r.note.is_none() {
        f.push("invariant: a truncated answer must carry a note on how to continue".into());
    }
    f
}

/// What differs between a case's expectation of a status and the engine's.
pub fn check_status(e: &Expect, s: &Status) -> Vec<String> {
    let mut f = Vec::new();
    if let Some(n) = e.files {
        if s.files != n {
            f.push(format!("files: expected {n}, got {}", s.files));
        }
    }
    if let Some(n) = e.chunks_at_least {
        if s.chunks < n {
            f.push(format!("chunksAtLeast: expected at least {n} chunks, got {}", s.chunks));
        }
    }
    if let Some(d) = e.dirty {
        if s.dirty != d {
            f.push(format!("dirty: expected {d}, got {}", s.dirty));
        }
    }
    f
}

/// What every status answer must hold: a name, the workspace, the engine's declared capabilities (unless a
/// fallback engine is answering), and the wire shape.
pub fn status_invariants(s: &Status, declared: &Capabilities) -> Vec<String> {
    let mut f = Vec::new();
    if s.backend.trim().is_empty() {
        f.push("invariant: status.backend is empty".into());
    }
    if s.workspace.trim().is_empty() {
        f.push("invariant: status.workspace is empty".into());
    }
    if s.fallback.is_none() && s.capabilities != *declared {
        f.push(format!("invariant: status.capabilities {:?} differ from the engine's capabilities() {declared:?}", s.capabilities));
    }
    match serde_json::to_value(s) {
        Ok(v) => {
            for key in ["backend", "workspace", "files", "chunks", "capabilities", "dirty"] {
                if v.get(key).is_none() {
                    f.push(format!("invariant: status JSON lacks `{key}`"));
                }
            }
        }
        Err(e) => f.push(format!("invariant: status does not serialise: {e}")),
    }
    f
}

fn preview(s: &str) -> String {
    let p: String = s.chars().take(200).collect();
    if p.len() < s.len() {
        format!("{p}...")
    } else {
        p
    }
}
