//! "Remember this": append a timestamped entry to today's daily log `memory/YYYY-MM-DD.md`.
//!
//! Append-only and atomic: the file is opened with `O_APPEND` (created if missing, never truncated) and the whole
//! entry, with the day's heading when the file is new, goes out in one `write`, so a concurrent writer (the agent,
//! an editor, another `memory append`) never sees a half entry and no byte already in the file is rewritten.
//! All or nothing: when the write comes up short (disk full, quota) or fails, the bytes it did write are cut off
//! again before the error is reported, so a retry never leaves fragments.
//! Symbolic links on the way (`memory/` or the log itself) are refused, as `memory_get` refuses them.

use std::fs::OpenOptions;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::{MemoryError, Result};

/// Largest entry accepted, in bytes: one note, not a document.
pub const MAX_ENTRY_BYTES: usize = 16 * 1024;

/// Where an entry went.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Appended {
    /// Workspace-relative path, e.g. `memory/2026-11-30.md`.
    pub path: String,
    /// 1-based first and last line of the entry in the file after the write.
    pub start_line: usize,
    pub end_line: usize,
    /// The exact text appended (without the day heading).
    pub entry: String,
    /// True when this append created the file.
    pub created: bool,
}

/// The entry as written: `- [HH:MM] first line`, further lines indented under it.
pub fn format_entry(text: &str, time: &str) -> Result<String> {
    // A lone `\r` ends a line for CommonMark readers as `\n` does: normalised first, so every line after the
    // first is indented under the entry and none can start a heading or a new list item at column 0.
    let text = text.replace("\r\n", "\n").replace('\r', "\n");
    let text = text.trim();
    if text.is_empty() {
        return Err(MemoryError::InvalidInput("nothing to append: the text is empty".into()));
    }
    if text.len() > MAX_ENTRY_BYTES {
        return Err(MemoryError::InvalidInput(format!("the text is {} bytes; one entry holds at most {MAX_ENTRY_BYTES}", text.len())));
    }
    if text.contains('\0') {
        return Err(MemoryError::InvalidInput("the text contains a NUL character".into()));
    }
    let mut out = String::with_capacity(text.len() + 16);
    for (i, line) in text.lines().enumerate() {
        let line = line.trim_end();
        if i == 0 {
            out.push_str(&format!("- [{time}] {line}\n"));
        } else if line.is_empty() {
            out.push('\n');
        } else {
            out.push_str("  ");
            out.push_str(line);
            out.push('\n');
        }
    }
    Ok(out)
}

/// Append `text` to `memory/<date>.md` under `workspace`, stamped with `time` (e.g. `14:03`).
pub fn append_entry_at(workspace: &Path, text: &str, date: &str, time: &str) -> Result<Appended> {
    let entry = format_entry(text, time)?;
    let dir = workspace.join(crate::discovery::MEMORY_DIR);
    refuse_link(&dir)?;
    match std::fs::create_dir(&dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(MemoryError::io_path("cannot create", &dir, e)),
    }
    if !dir.is_dir() {
        return Err(MemoryError::Refused(format!("{} is not a folder", dir.display())));
    }
    let rel = format!("{}/{date}.md", crate::discovery::MEMORY_DIR);
    let path: PathBuf = dir.join(format!("{date}.md"));
    refuse_link(&path)?;

    // A new log starts with the day's heading, and nobody may append before it: the heading is written to a
    // private temporary file that is then hard-linked into place, which fails if the log already exists.
    let created = if std::fs::symlink_metadata(&path).is_err() { create_with_heading(&dir, &path, date)? } else { false };
    let mut file = OpenOptions::new().append(true).read(true).open(&path).map_err(|e| MemoryError::io_path("cannot open", &path, e))?;
    refuse_hard_link(&file, &path)?;
    // Appenders take turns on the log (an exclusive lock on it, released when `file` closes): where appending is
    // not one step of the file system (Wine's emulation of Windows lost 24 of 400 entries written by 8 threads at
    // once without it), an entry could land on another's bytes; and the check for a final newline below and the
    // write stay together. Editors take no lock; the one `write` below is what keeps their lines whole.
    // A file system without locks (some network mounts) still gets the entry: its appends are one step where
    // O_APPEND is honoured, which the lock only adds to.
    if let Err(e) = file.lock() {
        tracing::warn!(path = %path.display(), error = %e, "cannot lock the daily log; appending without the lock");
    }
    let mut buf = String::new();
    if !ends_with_newline(&mut file).map_err(|e| MemoryError::io_path("cannot read", &path, e))? {
        buf.push('\n');
    }
    buf.push_str(&entry);
    let bytes = buf.as_bytes();
    // One write of the whole entry: with O_APPEND the kernel places it at the end as a unit.
    let written = file.write(bytes);
    let n = *written.as_ref().unwrap_or(&0);
    let outcome = match written {
        Err(e) => Err(MemoryError::io_path("cannot append to", &path, e)),
        // A short write on a regular file means the disk is full or a quota was hit: never retried (a second
        // write could interleave with another writer).
        Ok(n) if n != bytes.len() => Err(MemoryError::io_path(
            "short write to",
            &path,
            std::io::Error::new(std::io::ErrorKind::StorageFull, format!("no space left: {n} of {} bytes written", bytes.len())),
        )),
        Ok(_) => file.flush().and_then(|()| file.sync_data()).map_err(|e| MemoryError::io_path("cannot sync", &path, e)),
    };
    if let Err(e) = outcome {
        // All or nothing: what went out of this entry is cut off again, so no half entry is ever seen twice and a
        // retry adds no fragment.
        if n > 0 {
            if let Err(cut) = take_back(&mut file, &path, n as u64) {
                tracing::error!(path = %path.display(), error = %e, cut = %cut, "a failed entry could not be taken back");
                return Err(MemoryError::Refused(format!("{e}; {cut}")));
            }
        }
        return Err(e);
    }
    drop(file);

    // Where did the entry land? Another writer may have appended meanwhile: find ours from the end.
    let content = std::fs::read_to_string(&path).unwrap_or_default();
    let (start_line, end_line) = match content.rfind(&entry) {
        Some(at) => {
            let start = content[..at].matches('\n').count() + 1;
            (start, start + entry.trim_end_matches('\n').matches('\n').count())
        }
        None => (0, 0),
    };
    Ok(Appended { path: rel, start_line, end_line, entry: entry.trim_end().to_string(), created })
}

/// Append `text` to today's daily log (local date and time).
pub fn append_entry(workspace: &Path, text: &str) -> Result<Appended> {
    let now = chrono::Local::now();
    append_entry_at(workspace, text, &now.format("%Y-%m-%d").to_string(), &now.format("%H:%M").to_string())
}

/// Create `path` holding only the day's heading, atomically. False when someone else created it first.
fn create_with_heading(dir: &Path, path: &Path, date: &str) -> Result<bool> {
    static SEQ: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let tmp = dir.join(format!(".{date}.md.{}-{n}.tmp", std::process::id()));
    if let Err(e) = std::fs::write(&tmp, format!("# {date}\n\n")) {
        // Disk full: no half-written temporary is left behind.
        let _ = std::fs::remove_file(&tmp);
        return Err(MemoryError::io_path("cannot write", &tmp, e));
    }
    let linked = std::fs::hard_link(&tmp, path);
    let _ = std::fs::remove_file(&tmp);
    match linked {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(false),
        Err(e) => Err(MemoryError::io_path("cannot create", path, e)),
    }
}

/// Cut the `n` bytes this process just appended (the file offset is at their end) off `file` again, and make the
/// cut durable. Refused when another writer appended after them: cutting there would take its entry too.
fn take_back(file: &mut std::fs::File, path: &Path, n: u64) -> std::result::Result<(), String> {
    let mut cut = || -> std::io::Result<bool> {
        let end = file.stream_position()?;
        if file.metadata()?.len() != end {
            return Ok(false);
        }
        file.set_len(end - n)?;
        file.sync_all()?;
        Ok(true)
    };
    match cut() {
        Ok(true) => Ok(()),
        Ok(false) => {
            Err(format!("the failed entry's first {n} bytes stay in {} (another writer appended after them); remove them by hand", path.display()))
        }
        Err(e) => Err(format!("cannot remove the failed entry's first {n} bytes from {}: {e}", path.display())),
    }
}

fn refuse_link(path: &Path) -> Result<()> {
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_symlink() => {
            Err(MemoryError::Refused(format!("{} is a symbolic link; memory files are never written through links", path.display())))
        }
        _ => Ok(()),
    }
}

/// A daily log with another name (a hard link placed in `memory/`) may be any file on the disk: refused, as
/// symbolic links are. A new log has two names for an instant while [`create_with_heading`] links it into place,
/// so a second count is taken after a moment before refusing.
fn refuse_hard_link(file: &std::fs::File, path: &Path) -> Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        let links = || file.metadata().map(|m| m.nlink()).map_err(|e| MemoryError::io_path("cannot stat", path, e));
        if links()? > 1 {
            std::thread::sleep(std::time::Duration::from_millis(50));
            let n = links()?;
            if n > 1 {
                return Err(MemoryError::Refused(format!(
                    "{} has {n} hard links (it is also another file); memory files are never written through links",
                    path.display()
                )));
            }
        }
    }
    let _ = (file, path);
    Ok(())
}

fn ends_with_newline(file: &mut std::fs::File) -> std::io::Result<bool> {
    let len = file.metadata()?.len();
    if len == 0 {
        return Ok(true);
    }
    file.seek(SeekFrom::Start(len - 1))?;
    let mut last = [0u8; 1];
    file.read_exact(&mut last)?;
    Ok(last[0] == b'\n')
}

#[cfg(test)]
mod tests;
