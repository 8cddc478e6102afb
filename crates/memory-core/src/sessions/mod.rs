//! Session transcripts as a memory source: JSONL files of an agent's conversations. Only user and
//! assistant text is indexed, one message per line as `User: ...` / `Assistant: ...` with whitespace collapsed,
//! secrets redacted, and every line mapped back to its JSONL line number.
//!
//! Transcripts grow by appending, so the index remembers how far it has read (`SessionState`, kept in the
//! file record's hash field) and later reads only the tail, once it has grown by `sync.sessions.deltaBytes` or
//! `deltaMessages`; a truncated or rotated file is re-read whole.

use std::path::Path;
use std::sync::OnceLock;

use regex::Regex;
use serde_json::Value;

use crate::discovery::{mtime_ms, MemoryFile, StatId};
use crate::types::Source;

/// A transcript line longer than this (a huge tool result, never a user or assistant message) is skipped.
pub const MAX_LINE_BYTES: usize = 8 << 20;

/// Index keys of transcripts start with this.
pub const KEY_PREFIX: &str = "sessions/";

/// The index key of the transcript file named `name` (`sessions/<name>`).
pub fn transcript_key(name: &str) -> String {
    format!("{KEY_PREFIX}{name}")
}

/// The flattened text of (part of) a transcript.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Flattened {
    /// `User: ...` / `Assistant: ...`, one message per line.
    pub lines: Vec<String>,
    /// 1-based JSONL line number of each flattened line.
    pub jsonl_lines: Vec<usize>,
    /// The day each flattened line was written (its record's `timestamp`), as midnight UTC in Unix ms of the day
    /// in this machine's time zone; `None` when the record has none.
    pub days: Vec<Option<i64>>,
    /// JSONL lines consumed (complete lines only).
    pub records: usize,
}

impl Flattened {
    pub fn text(&self) -> String {
        self.lines.join("\n")
    }
}

/// Flatten complete JSONL lines of `text`, numbering them from `first_line` (1-based). A trailing line without a
/// newline is left for the next read (the writer may be in the middle of it). Malformed lines are skipped.
pub fn flatten(text: &str, first_line: usize) -> Flattened {
    let mut out = Flattened::default();
    let mut rest = text;
    let mut n = first_line;
    while let Some(end) = rest.find('\n') {
        let line = &rest[..end];
        rest = &rest[end + 1..];
        if let Some((msg, day)) = message(line) {
            out.lines.push(msg);
            out.jsonl_lines.push(n);
            out.days.push(day);
        }
        out.records += 1;
        n += 1;
    }
    out
}

/// `User: ...` or `Assistant: ...` for a user/assistant message line with text; `None` for anything else
/// (tool calls and results, images, system messages, metadata, malformed JSON).
pub fn message_text(line: &str) -> Option<String> {
    message(line).map(|(text, _)| text)
}

/// The day a record was written: its `timestamp` (RFC 3339 text or Unix milliseconds; the message's own when the
/// record has none), in this machine's time zone, as [`crate::discovery::day_millis`] gives days.
fn record_day(v: &Value) -> Option<i64> {
    let t = v.get("timestamp").or_else(|| v.get("message").and_then(|m| m.get("timestamp")))?;
    let instant = match t {
        Value::String(s) => chrono::DateTime::parse_from_rfc3339(s).ok()?.with_timezone(&chrono::Local),
        Value::Number(n) => chrono::DateTime::from_timestamp_millis(n.as_i64()?)?.with_timezone(&chrono::Local),
        _ => return None,
    };
    crate::discovery::day_millis(instant.date_naive())
}

/// [`message_text`] and the day the record was written ([`record_day`]).
fn message(line: &str) -> Option<(String, Option<i64>)> {
    let v: Value = match crate::bounded::json(line.trim(), MAX_LINE_BYTES) {
        Ok(v) => v,
        Err(e @ (crate::bounded::ParseError::TooLarge { .. } | crate::bounded::ParseError::TooDeep(_))) => {
            tracing::debug!(error = %e, "transcript line skipped");
            return None;
        }
        Err(_) => return None,
    };
    if v.get("type").and_then(Value::as_str).is_some_and(|t| t != "message") {
        return None;
    }
    let msg = v.get("message").unwrap_or(&v);
    let label = match msg.get("role").and_then(Value::as_str)? {
        "user" => "User",
        "assistant" => "Assistant",
        _ => return None,
    };
    let mut text = String::new();
    match msg.get("content")? {
        Value::String(s) => text.push_str(s),
        Value::Array(parts) => {
            for p in parts {
                let is_text = p.get("type").and_then(Value::as_str).is_none_or(|t| t == "text" || t == "input_text" || t == "output_text");
                if let (true, Some(t)) = (is_text, p.get("text").and_then(Value::as_str)) {
                    if !text.is_empty() {
                        text.push(' ');
                    }
                    text.push_str(t);
                }
            }
        }
        _ => return None,
    }
    let collapsed = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if collapsed.is_empty() {
        return None;
    }
    Some((format!("{label}: {}", redact(&collapsed)), record_day(&v)))
}

fn redaction_rules() -> &'static [(Regex, &'static str)] {
    static RULES: OnceLock<Vec<(Regex, &'static str)>> = OnceLock::new();
    RULES.get_or_init(|| {
        [
            // user:password@ in URLs
            (r"([A-Za-z][A-Za-z0-9+.-]*://[^/\s:@]+):[^@\s/]+@", "$1:[REDACTED]@"),
            (r"(?i)\b(bearer)\s+[A-Za-z0-9._~+/=-]{8,}", "$1 [REDACTED]"),
            (r"\bsk-[A-Za-z0-9_-]{16,}", "[REDACTED]"),
            (r"\bAKIA[0-9A-Z]{16}\b", "[REDACTED]"),
            (r"\bgh[pousr]_[A-Za-z0-9]{30,}", "[REDACTED]"),
            (r"\bxox[abprs]-[A-Za-z0-9-]{10,}", "[REDACTED]"),
            (r"\bAIza[0-9A-Za-z_-]{35}", "[REDACTED]"),
            (r#"(?i)\b(api[_-]?key|access[_-]?token|secret|password|passwd)(\s*[=:]\s*)["']?[^\s"',;]{6,}"#, "$1$2[REDACTED]"),
        ]
        .into_iter()
        .map(|(p, r)| (Regex::new(p).expect("redaction pattern"), r))
        .collect()
    })
}

/// Replace API keys, bearer tokens, passwords in URLs and `password=...` style secrets.
pub fn redact(text: &str) -> String {
    let mut out = std::borrow::Cow::Borrowed(text);
    for (re, rep) in redaction_rules() {
        if re.is_match(&out) {
            out = std::borrow::Cow::Owned(re.replace_all(&out, *rep).into_owned());
        }
    }
    out.into_owned()
}

/// How far a transcript has been indexed. Stored in the file record's `hash` field as
/// `session:v1:<bytes>:<records>:<messages>:<sha256 of the first bytes>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionState {
    /// Bytes consumed (up to the end of the last complete line).
    pub bytes: u64,
    /// JSONL lines consumed.
    pub records: usize,
    /// Messages that were indexed (user/assistant lines with text).
    pub messages: usize,
    /// sha256 of the first `min(bytes, PREFIX_BYTES)` bytes: tells a rotated file from a grown one.
    pub prefix_hash: String,
}

pub const PREFIX_BYTES: usize = 4096;

impl SessionState {
    /// What every encoded state starts with.
    pub const PREFIX: &'static str = "session:v1:";

    pub fn encode(&self) -> String {
        format!("{}{}:{}:{}:{}", Self::PREFIX, self.bytes, self.records, self.messages, self.prefix_hash)
    }

    pub fn decode(s: &str) -> Option<SessionState> {
        let rest = s.strip_prefix(Self::PREFIX)?;
        let mut it = rest.splitn(4, ':');
        Some(SessionState {
            bytes: it.next()?.parse().ok()?,
            records: it.next()?.parse().ok()?,
            messages: it.next()?.parse().ok()?,
            prefix_hash: it.next()?.to_string(),
        })
    }
}

/// Is a file of this name a transcript (`*.jsonl`)?
pub fn is_transcript_name(p: &Path) -> bool {
    p.extension().is_some_and(|x| x == "jsonl")
}

/// Transcripts (`*.jsonl`) in `dir`, not following links.
pub fn discover(dir: &Path) -> Vec<MemoryFile> {
    let mut out = Vec::new();
    let Ok(rd) = std::fs::read_dir(dir) else { return out };
    out.extend(rd.flatten().filter_map(|e| transcript_file(&e.path())));
    out.sort_by(|a, b| a.key.cmp(&b.key));
    out
}

/// The transcript at `p` as [`discover`] lists it (`None`: no transcript there now).
pub fn transcript_file(p: &Path) -> Option<MemoryFile> {
    let m = std::fs::symlink_metadata(p).ok()?;
    if !m.is_file() || !is_transcript_name(p) {
        return None;
    }
    let Some(name) = p.file_name().and_then(|n| n.to_str()) else {
        // A lossy key could name another transcript: skipped, and said.
        tracing::warn!(path = ?p, "name is not UTF-8; skipped (rename it to index it)");
        return None;
    };
    Some(MemoryFile {
        source: Source::Sessions,
        key: transcript_key(name),
        abs_path: p.to_path_buf(),
        size: m.len(),
        mtime_ms: mtime_ms(&m),
        stat: StatId::of(&m),
    })
}

pub use memory_contract::space::sessions_dir;

#[cfg(test)]
mod tests;
