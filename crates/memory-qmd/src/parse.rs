//! Parsing what `qmd` prints: the `--json` hit list (robust to noise around it) and `update` summaries.

use memory_core::error::MemoryError;
use serde_json::Value;

use crate::process::strip_ansi;

/// One QMD hit as printed by `qmd search|vsearch|query --json`.
#[derive(Debug, Clone, PartialEq)]
pub struct QmdHit {
    pub docid: Option<String>,
    pub score: f64,
    /// `qmd://<collection>/<path>`.
    pub file: String,
    /// The best-matching line (1-based), when given.
    pub line: Option<usize>,
    pub title: Option<String>,
    /// The snippet without its `@@` header.
    pub text: String,
    /// 1-based first line of the snippet (from the `@@ -start,count @@` header).
    pub start_line: Option<usize>,
    /// Lines the snippet covers, per the header.
    pub line_count: Option<usize>,
}

/// Parse the JSON list of hits. Anything before or after the array (warnings printed to stdout, cursor codes)
/// is ignored; a missing or truncated array is an error.
pub fn parse_hits(stdout: &str) -> Result<Vec<QmdHit>, MemoryError> {
    let clean = strip_ansi(stdout);
    let value = find_json_array(&clean).ok_or_else(|| {
        let preview: String = clean.trim().chars().take(200).collect();
        MemoryError::Internal(format!(
            "unparsable qmd output (no JSON result list){}",
            if preview.is_empty() { " - it printed nothing".to_string() } else { format!(": {preview:?}") }
        ))
    })?;
    let Value::Array(items) = value else { unreachable!("find_json_array returns arrays") };
    items.into_iter().enumerate().map(|(i, v)| hit_from_value(i, v)).collect()
}

/// The first complete JSON array in `text` whose elements are objects (or an empty array).
fn find_json_array(text: &str) -> Option<Value> {
    let trimmed = text.trim();
    // Bounded like every parse of outside text (the output is already capped in size by `process`).
    if let Ok(v @ Value::Array(_)) = memory_core::bounded::json(trimmed, usize::MAX) {
        return Some(v);
    }
    let mut from = 0;
    while let Some(off) = text[from..].find('[') {
        let at = from + off;
        let mut stream = serde_json::Deserializer::from_str(&text[at..]).into_iter::<Value>();
        if let Some(Ok(Value::Array(items))) = stream.next() {
            if items.iter().all(Value::is_object) {
                return Some(Value::Array(items));
            }
        }
        from = at + 1;
    }
    None
}

fn hit_from_value(i: usize, v: Value) -> Result<QmdHit, MemoryError> {
    let bad = |why: &str| MemoryError::Internal(format!("unparsable qmd output: result {i} {why}"));
    let obj = v.as_object().ok_or_else(|| bad("is not an object"))?;
    let file = obj.get("file").and_then(Value::as_str).ok_or_else(|| bad("has no `file`"))?.to_string();
    let score = match obj.get("score") {
        Some(Value::Number(n)) => n.as_f64().unwrap_or(0.0),
        Some(Value::String(s)) => s.parse().map_err(|_| bad("has a non-numeric `score`"))?,
        None | Some(Value::Null) => 0.0,
        Some(_) => return Err(bad("has a non-numeric `score`")),
    };
    let line = obj.get("line").and_then(Value::as_u64).map(|n| n as usize);
    let snippet = obj.get("snippet").and_then(Value::as_str).unwrap_or("");
    let (start_line, line_count, text) = split_snippet(snippet);
    Ok(QmdHit {
        docid: obj.get("docid").and_then(Value::as_str).map(str::to_string),
        score: if score.is_finite() { score } else { 0.0 },
        file,
        line,
        title: obj.get("title").and_then(Value::as_str).map(str::to_string),
        text,
        start_line,
        line_count,
    })
}

/// Split `@@ -start,count @@ (...)\n<text>` into (start, count, text). Without a header, the text is whole.
pub fn split_snippet(snippet: &str) -> (Option<usize>, Option<usize>, String) {
    let (first, rest) = match snippet.split_once('\n') {
        Some((a, b)) => (a, b),
        None => (snippet, ""),
    };
    if let Some((start, count)) = parse_header(first) {
        (Some(start), Some(count), rest.to_string())
    } else {
        (None, None, snippet.to_string())
    }
}

fn parse_header(line: &str) -> Option<(usize, usize)> {
    let rest = line.trim_start().strip_prefix("@@ -")?;
    let (range, _) = rest.split_once(" @@")?;
    let (start, count) = match range.split_once(',') {
        Some((s, c)) => (s.trim().parse().ok()?, c.trim().parse().ok()?),
        None => (range.trim().parse().ok()?, 1),
    };
    Some((start, count))
}

/// Counts from `qmd update` / `qmd collection add`: lines like `Indexed: 2 new, 1 updated, 4 unchanged, 0 removed`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct UpdateCounts {
    pub new: usize,
    pub updated: usize,
    pub unchanged: usize,
    pub removed: usize,
    /// How many `Indexed:` lines were found (one per collection).
    pub collections: usize,
}

impl UpdateCounts {
    pub fn files(&self) -> usize {
        self.new.saturating_add(self.updated).saturating_add(self.unchanged)
    }
}

pub fn parse_update(output: &str) -> UpdateCounts {
    let mut c = UpdateCounts::default();
    for line in strip_ansi(output).lines() {
        let Some(rest) = line.trim().strip_prefix("Indexed:") else { continue };
        c.collections += 1;
        for part in rest.split(',') {
            let mut it = part.split_whitespace();
            let (Some(n), Some(what)) = (it.next(), it.next()) else { continue };
            let Ok(n) = n.parse::<usize>() else { continue };
            // Saturating: the numbers are whatever qmd printed, and garbage must not panic.
            let field = match what {
                "new" => &mut c.new,
                "updated" => &mut c.updated,
                "unchanged" => &mut c.unchanged,
                "removed" => &mut c.removed,
                _ => continue,
            };
            *field = field.saturating_add(n);
        }
    }
    c
}

/// Split a `qmd://collection/path` URI into (collection, path).
pub fn split_qmd_uri(uri: &str) -> Option<(&str, &str)> {
    let rest = uri.strip_prefix("qmd://")?;
    let (collection, path) = rest.split_once('/')?;
    if collection.is_empty() || path.is_empty() {
        return None;
    }
    Some((collection, path))
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = r##"[
  {
    "docid": "#df3244",
    "score": 0.52,
    "file": "qmd://memory/2026-11-01.md",
    "line": 5,
    "title": "Day 1",
    "snippet": "@@ -4,4 @@ (3 before, 0 after)\nline b\nWe discussed the giraffe migration.\nmore\n"
  }
]"##;

    #[test]
    fn parses_qmd_json() {
        let hits = parse_hits(SAMPLE).unwrap();
        assert_eq!(hits.len(), 1);
        let h = &hits[0];
        assert_eq!(h.docid.as_deref(), Some("#df3244"));
        assert_eq!(h.score, 0.52);
        assert_eq!(h.file, "qmd://memory/2026-11-01.md");
        assert_eq!(h.line, Some(5));
        assert_eq!((h.start_line, h.line_count), (Some(4), Some(4)));
        assert_eq!(h.text, "line b\nWe discussed the giraffe migration.\nmore\n");
    }

    #[test]
    fn noise_around_the_json_is_ignored() {
        let noisy = format!("\u{1b}[?25lWarning: 7 documents need embeddings [beta]\n{SAMPLE}\n\u{1b}[?25h");
        assert_eq!(parse_hits(&noisy).unwrap().len(), 1);
        assert!(parse_hits("[]\n").unwrap().is_empty());
    }

    #[test]
    fn garbage_and_truncated_output_are_errors() {
        for bad in ["", "Segmentation fault", "<html>oops</html>", &SAMPLE[..SAMPLE.len() / 2], "[1, 2]", r#"[{"score": 1}]"#] {
            let e = parse_hits(bad).unwrap_err();
            assert_eq!(e.kind(), memory_core::ErrorKind::Internal, "{bad:?}");
            assert!(e.to_string().contains("unparsable qmd output"), "{e}");
        }
    }

    #[test]
    fn snippet_headers() {
        assert_eq!(split_snippet("@@ -12,3 @@ (11 before, 2 after)\na\nb\nc"), (Some(12), Some(3), "a\nb\nc".into()));
        assert_eq!(split_snippet("@@ -7 @@\nx"), (Some(7), Some(1), "x".into()));
        assert_eq!(split_snippet("no header\nhere"), (None, None, "no header\nhere".into()));
    }

    #[test]
    fn update_summaries() {
        let out = "Updating 2 collection(s)...\n[1/2] memory\nIndexed: 2 new, 1 updated, 4 unchanged, 3 removed\n[2/2] root\nIndexed: 0 new, 0 updated, 1 unchanged, 0 removed\n";
        let c = parse_update(out);
        assert_eq!(c, UpdateCounts { new: 2, updated: 1, unchanged: 5, removed: 3, collections: 2 });
        assert_eq!(c.files(), 8);
    }

    #[test]
    fn huge_update_counts_saturate() {
        // A crash of the fuzz/qmd_output target: counts summing past usize::MAX panicked (overflow) in debug builds.
        let c = parse_update(&format!("Indexed: {} new, 1 updated\nIndexed: 1 new, 0 unchanged\n", usize::MAX));
        assert_eq!((c.new, c.updated, c.collections), (usize::MAX, 1, 2));
        assert_eq!(c.files(), usize::MAX);
    }

    #[test]
    fn qmd_uris() {
        assert_eq!(split_qmd_uri("qmd://memory/sub/a b.md"), Some(("memory", "sub/a b.md")));
        assert_eq!(split_qmd_uri("qmd://memory/"), None);
        assert_eq!(split_qmd_uri("memory/a.md"), None);
    }
}
