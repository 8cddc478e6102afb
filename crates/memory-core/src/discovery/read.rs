//! Reading a memory file: its text (bounded, binary and undecodable files skipped with a reason the user sees),
//! its modification time, and the media types multimodal indexing reads.

use std::path::Path;

/// Why a file was not indexed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SkipReason {
    TooLarge {
        size: u64,
        limit: u64,
    },
    Binary,
    NotUtf8,
    /// Could not be opened or read (permissions, an I/O error): unlike the others this can change without the
    /// file's size or mtime moving (a `chmod`), so it is retried ([`crate::store::FileState::Unreadable`]).
    Unreadable(String),
}

/// Why a file cannot be read, in a few words (`permission denied`), for warnings and file records.
pub fn unreadable_why(e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::PermissionDenied => "permission denied".into(),
        std::io::ErrorKind::NotFound => "not found".into(),
        _ => e.to_string(),
    }
}

impl std::fmt::Display for SkipReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SkipReason::TooLarge { size, limit } => write!(f, "file is {size} bytes, over the {limit}-byte limit"),
            SkipReason::Binary => write!(f, "file looks binary (contains NUL bytes)"),
            SkipReason::NotUtf8 => write!(f, "file is not valid UTF-8"),
            SkipReason::Unreadable(e) => write!(f, "unreadable ({e})"),
        }
    }
}

/// Read a memory file as text, or say why it must be skipped.
pub fn read_text(path: &Path, max_bytes: u64) -> Result<String, SkipReason> {
    let size = std::fs::metadata(path).map_err(|e| SkipReason::Unreadable(unreadable_why(&e)))?.len();
    if size > max_bytes {
        return Err(SkipReason::TooLarge { size, limit: max_bytes });
    }
    let bytes = std::fs::read(path).map_err(|e| SkipReason::Unreadable(unreadable_why(&e)))?;
    if bytes.len() as u64 > max_bytes {
        return Err(SkipReason::TooLarge { size: bytes.len() as u64, limit: max_bytes });
    }
    if bytes.contains(&0) {
        return Err(SkipReason::Binary);
    }
    let mut text = String::from_utf8(bytes).map_err(|_| SkipReason::NotUtf8)?;
    if text.starts_with('\u{feff}') {
        text.drain(..3);
    }
    Ok(text)
}

pub fn mtime_ms(m: &std::fs::Metadata) -> i64 {
    m.modified().ok().and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok()).map(|d| d.as_millis() as i64).unwrap_or(0)
}

/// The MIME type of an image or audio file that multimodal memory indexes, by extension.
pub fn media_mime(p: &Path) -> Option<&'static str> {
    let ext = p.extension()?.to_str()?.to_ascii_lowercase();
    Some(match ext.as_str() {
        "jpg" | "jpeg" => "image/jpeg",
        "png" => "image/png",
        "webp" => "image/webp",
        "gif" => "image/gif",
        "heic" => "image/heic",
        "heif" => "image/heif",
        "mp3" => "audio/mp3",
        "wav" => "audio/wav",
        "ogg" => "audio/ogg",
        "opus" => "audio/opus",
        "m4a" => "audio/mp4",
        "aac" => "audio/aac",
        "flac" => "audio/flac",
        _ => return None,
    })
}
