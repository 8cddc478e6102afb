//! `memory.qmd.sessions`: session transcripts (JSONL) exported as Markdown for QMD to index.
//!
//! Each transcript `<name>.jsonl` becomes `<export>/<name>.md` with one `User: ...` / `Assistant: ...` line per
//! message (flattened and redacted by `memory_core::sessions`), plus `<name>.md.lines`: the JSONL line number of
//! each Markdown line, so hits map back to the transcript's own line numbers. Files are rewritten only when their
//! content changes (QMD then sees them unchanged); exports of deleted or expired transcripts are removed.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use memory_core::sessions;
use tracing::{debug, warn};

/// Collection name for exported transcripts.
pub const SESSIONS_COLLECTION: &str = "sessions";

const MAP_SUFFIX: &str = ".lines";

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct ExportReport {
    pub exported: usize,
    pub written: usize,
    pub removed: usize,
}

fn write_if_changed(path: &Path, bytes: &[u8]) -> std::io::Result<bool> {
    if std::fs::read(path).is_ok_and(|old| old == bytes) {
        return Ok(false);
    }
    let tmp = path.with_extension("tmp-export");
    std::fs::write(&tmp, bytes)?;
    std::fs::rename(&tmp, path)?;
    Ok(true)
}

/// Export every transcript in `src` (skipping those older than `retention_days`) into `out`.
pub fn export(src: &Path, out: &Path, retention_days: Option<u64>) -> std::io::Result<ExportReport> {
    std::fs::create_dir_all(out)?;
    let mut report = ExportReport::default();
    let mut keep = HashSet::new();
    let cutoff = retention_days.map(|d| memory_core::now_ms() - (d as i64) * 86_400_000);
    for f in sessions::discover(src) {
        if cutoff.is_some_and(|c| f.mtime_ms < c) {
            continue;
        }
        let bytes = match std::fs::read(&f.abs_path) {
            Ok(b) => b,
            Err(e) => {
                warn!(path = %f.abs_path.display(), error = %e, "cannot read transcript; skipped");
                continue;
            }
        };
        let flat = sessions::flatten(&String::from_utf8_lossy(&bytes), 1);
        if flat.lines.is_empty() {
            continue;
        }
        let stem = f.abs_path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
        let md_name = format!("{stem}.md");
        let mut text = flat.text();
        text.push('\n');
        let map = serde_json::to_vec(&flat.jsonl_lines).expect("numbers serialise");
        let md = out.join(&md_name);
        // The map first: a reader never sees Markdown lines without their numbers.
        let a = write_if_changed(&out.join(format!("{md_name}{MAP_SUFFIX}")), &map)?;
        let b = write_if_changed(&md, text.as_bytes())?;
        if a || b {
            report.written += 1;
        }
        report.exported += 1;
        keep.insert(md_name.clone());
        keep.insert(format!("{md_name}{MAP_SUFFIX}"));
    }
    for e in std::fs::read_dir(out)?.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if (name.ends_with(".md") || name.ends_with(MAP_SUFFIX)) && !keep.contains(&name) {
            std::fs::remove_file(e.path())?;
            if name.ends_with(".md") {
                report.removed += 1;
            }
        }
    }
    debug!(?report, "transcripts exported for qmd");
    Ok(report)
}

/// The JSONL line numbers of an exported Markdown file's lines.
pub fn line_map(out: &Path, md_rel: &str) -> Option<Vec<usize>> {
    let bytes = std::fs::read(out.join(format!("{md_rel}{MAP_SUFFIX}"))).ok()?;
    serde_json::from_slice(&bytes).ok()
}

/// The transcript key (`sessions/<name>.jsonl`) of an exported Markdown file.
pub fn transcript_key(md_rel: &str) -> String {
    let stem = md_rel.strip_suffix(".md").unwrap_or(md_rel);
    sessions::transcript_key(&format!("{stem}.jsonl"))
}

/// Where the Markdown exports go: `memory.qmd.sessions.exportDir` (relative to the QMD home), else
/// `<home>/sessions`.
pub fn export_dir(home: &Path, configured: Option<&str>) -> PathBuf {
    match configured {
        Some(d) => {
            let p = memory_core::paths::expand_home(d);
            if p.is_absolute() {
                p
            } else {
                home.join(p)
            }
        }
        None => home.join("sessions"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(role: &str, text: &str) -> String {
        serde_json::json!({"type": "message", "message": {"role": role, "content": text}}).to_string()
    }

    #[test]
    fn transcripts_become_markdown_with_line_maps() {
        let dir = tempfile::tempdir().unwrap();
        let src = dir.path().join("src");
        let out = dir.path().join("out");
        std::fs::create_dir_all(&src).unwrap();
        let jsonl = [
            r#"{"type":"session","id":"s1"}"#.to_string(),
            msg("user", "Where did we see the narwhal?"),
            r#"{"type":"tool_result","content":"x"}"#.to_string(),
            msg("assistant", "In the   fjord, password=hunter2secret"),
        ]
        .join("\n")
            + "\n";
        std::fs::write(src.join("s1.jsonl"), &jsonl).unwrap();
        std::fs::write(src.join("empty.jsonl"), r#"{"type":"session"}"#.to_string() + "\n").unwrap();
        let r = export(&src, &out, None).unwrap();
        assert_eq!(r, ExportReport { exported: 1, written: 1, removed: 0 });
        let md = std::fs::read_to_string(out.join("s1.md")).unwrap();
        assert!(md.starts_with("User: Where did we see the narwhal?\nAssistant: In the fjord, password="), "{md}");
        assert!(!md.contains("hunter2secret"), "secrets are redacted: {md}");
        assert_eq!(line_map(&out, "s1.md"), Some(vec![2, 4]));
        assert_eq!(transcript_key("s1.md"), "sessions/s1.jsonl");
        // Unchanged: nothing rewritten. Deleted: export removed.
        assert_eq!(export(&src, &out, None).unwrap().written, 0);
        std::fs::remove_file(src.join("s1.jsonl")).unwrap();
        assert_eq!(export(&src, &out, None).unwrap().removed, 1);
        assert!(!out.join("s1.md").exists() && !out.join("s1.md.lines").exists());
    }
}
