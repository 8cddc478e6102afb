//! memory_get: a safe read of one memory file or a line range of it.
//!
//! Only what discovery's classifier calls a memory file ([`MemoryRoots::classify`]: `MEMORY.md`, `memory.md`,
//! `USER.md`, `memory/**` outside tool folders, what a configured extra path selects), ending in `.md`, with no
//! symbolic link on the way. `..`, absolute paths outside those roots and links are refused. A missing file that
//! would be allowed reads as empty (the day's log before its first write).

use std::path::{Component, Path, PathBuf};

use crate::discovery::{read_text, Match, MemoryRoots, Place, SkipReason};
use crate::error::{MemoryError, Result};
use crate::types::{GetRequest, GetResponse};

pub const DEFAULT_LINES: usize = 120;
pub const DEFAULT_MAX_CHARS: usize = 12_000;

/// Resolve a requested path to an absolute file path inside the memory roots, or refuse.
pub fn resolve(roots: &MemoryRoots, requested: &str) -> Result<(PathBuf, String)> {
    let raw = requested.trim();
    if raw.is_empty() {
        return Err(MemoryError::InvalidInput("path is empty".into()));
    }
    if raw.contains('\0') {
        return Err(refused(raw, "path contains a NUL byte"));
    }
    let p = Path::new(raw);
    if p.components().any(|c| matches!(c, Component::ParentDir)) {
        return Err(refused(raw, "`..` is not allowed in memory paths"));
    }
    if !raw.to_ascii_lowercase().ends_with(".md") {
        return Err(refused(raw, "only Markdown (.md) memory files can be read"));
    }

    // The place decides (discovery's classifier: what it lists is what may be read), then no link on the way.
    let abs = if p.is_absolute() { p.to_path_buf() } else { roots.workspace.join(p) };
    let abs = normalize(&abs);
    match roots.classify(&abs, false) {
        Match::File(Place::Extra(index)) => {
            let extra = normalize(&roots.extra_paths[index]);
            let (base, rel) = if abs == extra {
                (extra.parent().map(Path::to_path_buf).unwrap_or_default(), PathBuf::from(extra.file_name().unwrap_or_default()))
            } else {
                (extra.clone(), abs.strip_prefix(&extra).map(Path::to_path_buf).unwrap_or_default())
            };
            check_no_links(&base, &rel, raw)?;
            // The root itself must not be a link either.
            if std::fs::symlink_metadata(&extra).is_ok_and(|m| m.file_type().is_symlink()) {
                return Err(refused(raw, "the extra path is a symbolic link"));
            }
            Ok((abs.clone(), roots.key_for(&abs)))
        }
        Match::File(_) => {
            let rel = abs.strip_prefix(&roots.workspace).map(Path::to_path_buf).unwrap_or_default();
            check_no_links(&roots.workspace, &rel, raw)?;
            let key = roots.key_for(&abs);
            Ok((abs, key))
        }
        Match::Folder | Match::Outside => Err(refused(raw, &format!("not a memory file (allowed: {})", crate::discovery::MEMORY_FILES))),
    }
}

/// Lexical normalisation (drops `.` components); `..` was refused before.
fn normalize(p: &Path) -> PathBuf {
    p.components().filter(|c| !matches!(c, Component::CurDir)).collect()
}

fn check_no_links(base: &Path, rel: &Path, raw: &str) -> Result<()> {
    let mut cur = base.to_path_buf();
    for c in rel.components() {
        cur.push(c);
        match std::fs::symlink_metadata(&cur) {
            Ok(m) if m.file_type().is_symlink() => return Err(refused(raw, "symbolic links are not followed")),
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(MemoryError::io_path("cannot inspect", &cur, e)),
        }
    }
    Ok(())
}

/// Read a memory file (or lines of it) after the safety checks.
pub fn read(roots: &MemoryRoots, request: &GetRequest, max_file_bytes: u64) -> Result<GetResponse> {
    let (abs, key) = resolve(roots, &request.path)?;
    let meta = match std::fs::metadata(&abs) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Ok(GetResponse { path: key, missing: true, ..Default::default() });
        }
        Err(e) => return Err(MemoryError::io_path("cannot read", &abs, e)),
    };
    if !meta.is_file() {
        return Err(refused(&request.path, "not a regular file"));
    }
    let text = read_text(&abs, max_file_bytes).map_err(|why| match why {
        SkipReason::Unreadable(e) => MemoryError::Io { context: format!("cannot read {}", abs.display()), source: std::io::Error::other(e) },
        other => MemoryError::InvalidInput(format!("{}: {other}", request.path)),
    })?;
    Ok(excerpt(key, &text, request.from, request.lines, request.offset))
}

/// Cut `text` to the requested lines, within the default limits, with a note on how to continue. `offset`
/// skips that many characters of the first line: a line longer than [`DEFAULT_MAX_CHARS`] is returned in
/// parts, each answer saying (`truncated`, `nextOffset`, `note`) where the next part starts. `lines: 0`
/// returns no line.
pub fn excerpt(path: String, text: &str, from: Option<usize>, lines: Option<usize>, offset: Option<usize>) -> GetResponse {
    let all: Vec<&str> = text.lines().collect();
    let total = all.len();
    let from = from.unwrap_or(1).max(1);
    let want = lines.unwrap_or(DEFAULT_LINES);
    if from > total || want == 0 {
        return GetResponse { path, from, lines: 0, total_lines: total, text: String::new(), ..Default::default() };
    }
    let offset = offset.unwrap_or(0);
    let mut out = String::new();
    let mut out_chars = 0;
    let mut taken = 0;
    let mut cut_by_chars = false;
    let mut next_offset = None;
    for (i, line) in all.iter().skip(from - 1).take(want).enumerate() {
        let skip = if i == 0 { offset } else { 0 };
        let len = line.chars().count().saturating_sub(skip);
        let add = len + usize::from(taken > 0);
        if out_chars + add > DEFAULT_MAX_CHARS {
            if taken == 0 {
                // A single huge line: its first part, and where the rest starts.
                out.extend(line.chars().skip(skip).take(DEFAULT_MAX_CHARS));
                next_offset = Some(skip + DEFAULT_MAX_CHARS);
            }
            cut_by_chars = true;
            break;
        }
        if taken > 0 {
            out.push('\n');
        }
        out.extend(line.chars().skip(skip));
        out_chars += add;
        taken += 1;
    }
    if let Some(next) = next_offset {
        let len = all[from - 1].chars().count();
        let note = format!(
            "Line {from} has {len} characters; showing characters {}-{next}. Continue with from={from} and offset={next} to read the rest of it.",
            offset + 1
        );
        return GetResponse {
            path,
            text: out,
            from,
            lines: 1,
            total_lines: total,
            truncated: true,
            next_offset,
            note: Some(note),
            ..Default::default()
        };
    }
    let last = from + taken - 1;
    let truncated = last < total && (cut_by_chars || lines.is_none());
    let note = truncated.then(|| format!("Showing lines {from}-{last} of {total}. Continue with from={} to read more.", last + 1));
    GetResponse { path, text: out, from, lines: taken, total_lines: total, missing: false, truncated, note, next_offset: None }
}

/// A path refused by memory_get, with the reason spelled out for the agent.
fn refused(path: &str, why: &str) -> MemoryError {
    MemoryError::Refused(format!("{path}: {why}"))
}

#[cfg(test)]
mod tests;
