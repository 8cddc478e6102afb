//! The glob `extraPaths` entries are matched with: `*` within a segment, `**` over segments, `?`.

/// A glob over `/`-separated relative paths: `*` (within a segment), `**` (any number of segments), `?`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Glob {
    pattern: String,
}

impl Glob {
    pub fn new(pattern: &str) -> Glob {
        Glob { pattern: pattern.trim().trim_start_matches("./").to_string() }
    }

    pub fn as_str(&self) -> &str {
        &self.pattern
    }

    pub fn matches(&self, rel: &str) -> bool {
        let pat: Vec<&str> = self.pattern.split('/').filter(|s| !s.is_empty()).collect();
        let path: Vec<&str> = rel.split('/').filter(|s| !s.is_empty()).collect();
        match_segments(&pat, &path)
    }
}

fn match_segments(pat: &[&str], path: &[&str]) -> bool {
    match pat.first() {
        None => path.is_empty(),
        Some(&"**") => (0..=path.len()).any(|skip| match_segments(&pat[1..], &path[skip..])),
        Some(p) => !path.is_empty() && match_segment(p.as_bytes(), path[0].as_bytes()) && match_segments(&pat[1..], &path[1..]),
    }
}

fn match_segment(p: &[u8], s: &[u8]) -> bool {
    match p.first() {
        None => s.is_empty(),
        Some(b'*') => (0..=s.len()).any(|skip| match_segment(&p[1..], &s[skip..])),
        Some(b'?') => !s.is_empty() && match_segment(&p[1..], &s[1..]),
        Some(c) => s.first() == Some(c) && match_segment(&p[1..], &s[1..]),
    }
}
