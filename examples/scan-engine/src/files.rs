//! Which files are memory files, and `memory_get`'s safe read of one.
//!
//! Memory files are `MEMORY.md` at the workspace root (`memory.md` when there is no `MEMORY.md`), `USER.md`
//! there, and the Markdown files under `memory/`. Symbolic links are neither listed nor read, tool folders are
//! never walked, and `memory_get` refuses `..`, absolute paths elsewhere and anything that is not a memory file.

use std::path::{Component, Path, PathBuf};

use memory_contract::{GetRequest, GetResponse, MemoryError, Result};

/// Folders never walked.
const IGNORED_DIRS: &[&str] = &[".git", "node_modules", ".venv", "venv", "__pycache__", ".hg", ".svn"];

/// Lines `memory_get` returns when none are asked for.
const DEFAULT_LINES: usize = 120;

/// The largest memory file read; a larger one is skipped by search and refused by `memory_get`.
pub const MAX_FILE_BYTES: u64 = 16 * 1024 * 1024;

/// A memory file: its key (workspace-relative, with `/`) and where it is.
pub struct MemoryFile {
    pub key: String,
    pub abs: PathBuf,
}

/// Every memory file of the workspace, in a stable order.
pub fn memory_files(workspace: &Path) -> Vec<MemoryFile> {
    let mut out = Vec::new();
    let root_file = ["MEMORY.md", "memory.md"].into_iter().find(|name| is_regular_file(&workspace.join(name)));
    for name in root_file.into_iter().chain(["USER.md"]) {
        let abs = workspace.join(name);
        if is_regular_file(&abs) {
            out.push(MemoryFile { key: name.to_string(), abs });
        }
    }
    walk(&workspace.join("memory"), "memory", &mut out);
    out
}

fn walk(dir: &Path, key: &str, out: &mut Vec<MemoryFile>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    let mut entries: Vec<_> = entries.flatten().collect();
    entries.sort_by_key(std::fs::DirEntry::file_name);
    for entry in entries {
        let Ok(name) = entry.file_name().into_string() else { continue };
        let Ok(kind) = entry.file_type() else { continue };
        let child = format!("{key}/{name}");
        if kind.is_dir() && !IGNORED_DIRS.contains(&name.as_str()) {
            walk(&entry.path(), &child, out);
        } else if kind.is_file() && is_markdown(&name) {
            out.push(MemoryFile { key: child, abs: entry.path() });
        }
    }
}

fn is_markdown(name: &str) -> bool {
    name.len() > 3 && name[name.len() - 3..].eq_ignore_ascii_case(".md")
}

/// A regular file, not a symbolic link to one.
fn is_regular_file(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_file())
}

/// The text of a memory file (a byte-order mark dropped, invalid UTF-8 replaced); `None` when it cannot be read
/// or is larger than [`MAX_FILE_BYTES`].
pub fn read_text(abs: &Path) -> Option<String> {
    if std::fs::metadata(abs).ok()?.len() > MAX_FILE_BYTES {
        return None;
    }
    let bytes = std::fs::read(abs).ok()?;
    let text = String::from_utf8_lossy(&bytes);
    Some(text.strip_prefix('\u{feff}').unwrap_or(&text).to_string())
}

/// `memory_get`: the lines asked for of one memory file, after the checks.
pub fn get(workspace: &Path, request: &GetRequest) -> Result<GetResponse> {
    let raw = request.path.as_str();
    let refused = |why: &str| MemoryError::Refused(format!("{raw}: {why}"));
    if raw.trim().is_empty() {
        return Err(MemoryError::InvalidInput("path: empty (a memory file such as MEMORY.md or memory/2026-03-04.md)".into()));
    }
    let path = Path::new(raw);
    if raw.contains('\0') {
        return Err(refused("path contains a NUL byte"));
    }
    if path.components().any(|c| c == Component::ParentDir) {
        return Err(refused("`..` is not allowed in memory paths"));
    }
    if !is_markdown(raw) {
        return Err(refused("only Markdown (.md) memory files can be read"));
    }
    let rel = if path.is_absolute() { path.strip_prefix(workspace).map_err(|_| refused("outside the memory files"))? } else { path };
    let key = rel.components().filter_map(|c| if let Component::Normal(s) = c { s.to_str() } else { None }).collect::<Vec<_>>().join("/");
    let in_memory_dir = key.strip_prefix("memory/").is_some_and(|rest| !rest.split('/').any(|c| IGNORED_DIRS.contains(&c)));
    if !(in_memory_dir || ["MEMORY.md", "memory.md", "USER.md"].contains(&key.as_str())) {
        return Err(refused("not a memory file (MEMORY.md, USER.md, memory/**/*.md)"));
    }
    let mut at = workspace.to_path_buf();
    for part in key.split('/') {
        at.push(part);
        match std::fs::symlink_metadata(&at) {
            Ok(m) if m.file_type().is_symlink() => return Err(refused("symbolic links are not followed")),
            Ok(_) => {}
            Err(_) => return Ok(GetResponse { path: key, missing: true, ..GetResponse::default() }),
        }
    }
    let text = read_text(&at).ok_or_else(|| MemoryError::InvalidInput(format!("{raw}: cannot be read, or larger than {MAX_FILE_BYTES} bytes")))?;
    Ok(excerpt(key, &text, request.from, request.lines, request.offset.unwrap_or(0)))
}

/// Lines `from..` (1-based) of `text`: `lines` of them, else [`DEFAULT_LINES`] with a note on how to go on;
/// `offset` characters of the first one skipped.
fn excerpt(path: String, text: &str, from: Option<usize>, lines: Option<usize>, offset: usize) -> GetResponse {
    let all: Vec<&str> = text.lines().collect();
    let total = all.len();
    let from = from.unwrap_or(1).max(1);
    let mut shown: Vec<String> = all.iter().skip(from - 1).take(lines.unwrap_or(DEFAULT_LINES)).map(|l| (*l).to_string()).collect();
    if let Some(first) = shown.first_mut() {
        *first = first.chars().skip(offset).collect();
    }
    let last = from + shown.len() - 1;
    let truncated = lines.is_none() && !shown.is_empty() && last < total;
    let note = truncated.then(|| format!("Showing lines {from}-{last} of {total}. Continue with from={} to read more.", last + 1));
    GetResponse { path, text: shown.join("\n"), from, lines: shown.len(), total_lines: total, truncated, note, ..GetResponse::default() }
}
