//! Recall annotations on a memory entry's line, as OpenClaw's writers put them:
//!
//! ```markdown
//! - Keep the gateway on loopback. <!-- trigger: gateway setup, network safety --> <!-- importance: 9 -->
//! - Use the release helper. <!-- project: github.com/openclaw/openclaw -->
//! ```
//!
//! An entry is one line. Its annotations are HTML comments `<!-- kind: value -->` opened and closed on that line,
//! anywhere in it, several per line; `kind` is `trigger`, `project` or `importance` (any case). Trigger phrases
//! are separated by `,` or `;`; project keys by `;` (a key's host part, before its first `/`, is lowercased so
//! `GitHub.com/org/repo` and `github.com/org/repo` are one repository; `path:` keys are kept as they are).
//! Anything else is not an annotation and is ignored: an unclosed comment (it never reaches the next line, so
//! never another entry), an empty value, an importance outside 1..=10, a comment nested in a value. A project
//! annotation whose keys are not all valid (empty, `<` or `>` inside, too long) makes the entry tagged by an
//! invalid key: it is never eligible for trigger injection and is demoted, not boosted, in ranking.
//!
//! Parsing is bounded: at most [`MAX_PHRASES`] trigger phrases and [`MAX_PROJECT_KEYS`] project keys per line,
//! each at most [`MAX_VALUE_CHARS`] characters (longer ones are ignored); lines are scanned once.

/// Trigger phrases kept per entry (OpenClaw's writers attach a few).
pub const MAX_PHRASES: usize = 16;
/// Project keys kept per entry.
pub const MAX_PROJECT_KEYS: usize = 8;
/// A longer phrase or key is not one (ignored; for a project key: the entry's project tag is invalid).
pub const MAX_VALUE_CHARS: usize = 256;

/// The annotations of one line.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LineAnnotations {
    /// The highest valid `<!-- importance: N -->` of the line (1..=10).
    pub importance: Option<u8>,
    /// Trigger phrases, trimmed, de-duplicated, in order of appearance.
    pub triggers: Vec<String>,
    /// Project keys, normalised, de-duplicated, in order of appearance.
    pub projects: Vec<String>,
    /// A project annotation of the line could not be read whole: the entry is tagged, but by no valid key.
    pub project_invalid: bool,
}

impl LineAnnotations {
    pub fn is_empty(&self) -> bool {
        self.importance.is_none() && self.triggers.is_empty() && self.projects.is_empty() && !self.project_invalid
    }

    /// Tagged with a project (valid or not).
    pub fn is_project_tagged(&self) -> bool {
        !self.projects.is_empty() || self.project_invalid
    }

    /// Every project key of the entry is among `active` (false for an untagged entry or an invalid tag).
    pub fn projects_all_active(&self, active: &[String]) -> bool {
        !self.project_invalid && !self.projects.is_empty() && self.projects.iter().all(|k| active.iter().any(|a| a == k))
    }
}

/// An annotated line of a memory file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// 1-based line number in the file.
    pub line: usize,
    /// The line without its annotations (whitespace they leave at the end trimmed).
    pub text: String,
    pub annotations: LineAnnotations,
}

/// One `<!-- ... -->` comment of a line: its byte span and its body.
struct Comment<'a> {
    start: usize,
    end: usize,
    body: &'a str,
}

/// The closed comments of one line, left to right. An unclosed `<!--` ends the scan.
fn comments(line: &str) -> impl Iterator<Item = Comment<'_>> {
    let mut from = 0;
    std::iter::from_fn(move || {
        let open = from + line.get(from..)?.find("<!--")?;
        let body_start = open + 4;
        let close = body_start + line[body_start..].find("-->")?;
        from = close + 3;
        Some(Comment { start: open, end: close + 3, body: &line[body_start..close] })
    })
}

/// `kind: value` of an annotation comment, `kind` lowercased; `None` for other comments.
fn split_annotation(body: &str) -> Option<(&'static str, &str)> {
    let (kind, value) = body.split_once(':')?;
    let kind = kind.trim();
    let kind = ["trigger", "project", "importance"].into_iter().find(|k| kind.eq_ignore_ascii_case(k))?;
    Some((kind, value.trim()))
}

/// Whether the comment is an annotation this module reads (valid or not): such comments are stripped from
/// an entry's text.
fn is_annotation(body: &str) -> bool {
    split_annotation(body).is_some()
}

/// A project key as OpenClaw normalises it; `None` when it is not a valid key.
pub fn normalize_project_key(raw: &str) -> Option<String> {
    let key = raw.trim();
    if key.is_empty() || key.chars().count() > MAX_VALUE_CHARS || key.contains(['<', '>', '\r', '\n']) {
        return None;
    }
    if key.starts_with("path:") {
        return Some(key.to_string());
    }
    match key.find('/') {
        Some(slash) if slash > 0 => Some(format!("{}{}", key[..slash].to_lowercase(), &key[slash..])),
        _ => Some(key.to_string()),
    }
}

/// The annotations of one line (the text is taken as one line: a line break ends the scan).
pub fn parse_line(line: &str) -> LineAnnotations {
    let line = line.split(['\n', '\r']).next().unwrap_or("");
    let mut out = LineAnnotations::default();
    if !line.contains("<!--") {
        return out;
    }
    for c in comments(line) {
        let Some((kind, value)) = split_annotation(c.body) else { continue };
        if value.contains("<!--") {
            // A comment opened inside a value: not an annotation we can read.
            if kind == "project" {
                out.project_invalid = true;
            }
            continue;
        }
        match kind {
            "importance" => {
                if let Ok(n) = value.parse::<u8>() {
                    if (1..=10).contains(&n) {
                        out.importance = Some(out.importance.map_or(n, |m| m.max(n)));
                    }
                }
            }
            "trigger" => {
                for phrase in value.split([',', ';']).map(str::trim) {
                    if phrase.is_empty() || phrase.chars().count() > MAX_VALUE_CHARS || out.triggers.len() >= MAX_PHRASES {
                        continue;
                    }
                    if !out.triggers.iter().any(|p| p == phrase) {
                        out.triggers.push(phrase.to_string());
                    }
                }
            }
            _ => {
                let mut any = false;
                for raw in value.split(';') {
                    any = true;
                    match normalize_project_key(raw) {
                        Some(k) if out.projects.len() < MAX_PROJECT_KEYS => {
                            if !out.projects.contains(&k) {
                                out.projects.push(k);
                            }
                        }
                        Some(_) => {}
                        None => out.project_invalid = true,
                    }
                }
                if !any {
                    out.project_invalid = true;
                }
            }
        }
    }
    out
}

/// The line without its annotation comments (other comments stay), trailing whitespace trimmed.
pub fn strip_annotations(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut cursor = 0;
    for c in comments(line) {
        if is_annotation(c.body) {
            out.push_str(&line[cursor..c.start]);
            cursor = c.end;
        }
    }
    out.push_str(&line[cursor..]);
    out.trim_end().to_string()
}

/// The annotated lines of `text`, whose first line is line `first_line` of its file.
pub fn entries(text: &str, first_line: usize) -> impl Iterator<Item = Entry> + '_ {
    text.split('\n').enumerate().filter_map(move |(i, line)| {
        let line = line.strip_suffix('\r').unwrap_or(line);
        let annotations = parse_line(line);
        (!annotations.is_empty()).then(|| Entry { line: first_line + i, text: strip_annotations(line), annotations })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn reads_openclaw_examples() {
        let a = parse_line("- Keep the gateway on loopback. <!-- trigger: gateway setup, network safety --> <!-- importance: 9 -->");
        assert_eq!(a.triggers, ["gateway setup", "network safety"]);
        assert_eq!(a.importance, Some(9));
        assert!(a.projects.is_empty() && !a.project_invalid);
        let a = parse_line("- Use the release helper. <!-- project: GitHub.com/openclaw/openclaw -->");
        assert_eq!(a.projects, ["github.com/openclaw/openclaw"]);
        assert_eq!(parse_line("x <!-- project: path:/Home/Me/Repo; github.com/a/b -->").projects, ["path:/Home/Me/Repo", "github.com/a/b"]);
    }

    #[test]
    fn any_position_several_per_line_any_case() {
        let a = parse_line("<!--Trigger:deploy;rollback--> text <!-- PROJECT : github.com/o/r --> more <!--importance:3-->");
        assert_eq!(a.triggers, ["deploy", "rollback"]);
        assert_eq!(a.projects, ["github.com/o/r"]);
        assert_eq!(a.importance, Some(3));
        let two = parse_line("a <!-- trigger: one --> b <!-- trigger: two, one -->");
        assert_eq!(two.triggers, ["one", "two"]);
    }

    #[test]
    fn malformed_are_ignored() {
        assert!(parse_line("<!-- trigger: -->").is_empty());
        assert!(parse_line("<!-- trigger: deploy").is_empty(), "unclosed");
        assert!(parse_line("<!-- importance: 11 --> <!-- importance: x -->").is_empty());
        assert!(parse_line("<!-- note: trigger --> <!-- triggers deploy -->").is_empty());
        assert!(parse_line("<!-- trigger: a <!-- trigger: b -->").triggers.is_empty());
        let bad = parse_line("<!-- project: github.com/<o>/r -->");
        assert!(bad.project_invalid && bad.projects.is_empty() && bad.is_project_tagged());
        assert!(!bad.projects_all_active(&["github.com/<o>/r".into()]));
        assert!(parse_line("<!-- project: ; -->").project_invalid);
        assert!(parse_line("<!-- project: -->").project_invalid);
    }

    #[test]
    fn unclosed_comment_stays_on_its_line() {
        let text = "- first <!-- trigger: alpha\n- second <!-- trigger: beta -->\n- third -->";
        let e: Vec<Entry> = entries(text, 10).collect();
        assert_eq!(e.len(), 1);
        assert_eq!((e[0].line, e[0].text.as_str()), (11, "- second"));
        assert_eq!(e[0].annotations.triggers, ["beta"]);
    }

    #[test]
    fn cjk_triggers_and_stripping() {
        let a = parse_line("- 网关只监听本机。<!-- trigger: 网关设置；网络安全, 部署 -->");
        // A full-width semicolon is not a separator: that phrase stays whole.
        assert_eq!(a.triggers, ["网关设置；网络安全", "部署"]);
        assert_eq!(strip_annotations("- 网关只监听本机。<!-- trigger: 部署 --> <!-- note --> "), "- 网关只监听本机。 <!-- note -->");
    }

    #[test]
    fn bounded() {
        let many = format!("<!-- trigger: {} -->", (0..100).map(|i| format!("p{i}")).collect::<Vec<_>>().join(","));
        assert_eq!(parse_line(&many).triggers.len(), MAX_PHRASES);
        let long = format!("<!-- trigger: {} , ok -->", "x".repeat(MAX_VALUE_CHARS + 1));
        assert_eq!(parse_line(&long).triggers, ["ok"]);
        let keys = format!("<!-- project: {} -->", (0..20).map(|i| format!("h/r{i}")).collect::<Vec<_>>().join(";"));
        let a = parse_line(&keys);
        assert_eq!(a.projects.len(), MAX_PROJECT_KEYS);
        assert!(!a.project_invalid);
    }

    fn phrase() -> impl Strategy<Value = String> {
        prop_oneof!["[a-z]{1,8}( [a-z]{1,8}){0,2}", "[\u{4e00}-\u{4e80}]{1,6}", "[a-zA-Z0-9 ]{1,12}",]
            .prop_filter("non-empty", |s| !s.trim().is_empty())
    }

    proptest! {
        /// Annotations anywhere in a line, several per line, between arbitrary text: every well-formed phrase
        /// and key is read, the stripped text keeps the rest, and nothing panics.
        #[test]
        fn well_formed_anywhere(
            before in "[^<>\n\r]{0,20}", middle in "[^<>\n\r]{0,20}", after in "[^<>\n\r]{0,20}",
            triggers in proptest::collection::vec(phrase(), 1..4),
            repo in "[a-z]{1,8}\\.[a-z]{2,3}/[a-z]{1,8}/[a-z]{1,8}",
            importance in 1u8..=10, order in 0usize..3,
        ) {
            let t = format!("<!-- trigger: {} -->", triggers.join(", "));
            let p = format!("<!-- project: {repo} -->");
            let i = format!("<!-- importance: {importance} -->");
            let parts = match order { 0 => [t, p, i], 1 => [p, i, t], _ => [i, t, p] };
            let line = format!("{before}{}{middle}{}{after}{}", parts[0], parts[1], parts[2]);
            let a = parse_line(&line);
            for phrase in &triggers {
                prop_assert!(a.triggers.contains(&phrase.trim().to_string()), "{:?} not in {:?}", phrase, a.triggers);
            }
            prop_assert_eq!(&a.projects, &vec![repo.clone()]);
            prop_assert_eq!(a.importance, Some(importance));
            let stripped = strip_annotations(&line);
            prop_assert!(!stripped.contains("<!--"), "{}", stripped);
            let expected = format!("{before}{middle}{after}");
            prop_assert_eq!(stripped, expected.trim_end());
        }

        /// Any text: no panic; annotations never cross a line; every entry's line exists and holds a comment.
        #[test]
        fn any_text_is_safe(text in "(<!--|-->|trigger:|project:|importance:|[ a-z;,:\n\u{4e00}]){0,60}") {
            let lines: Vec<&str> = text.split('\n').collect();
            for e in entries(&text, 1) {
                prop_assert!(e.line >= 1 && e.line <= lines.len());
                let own = lines[e.line - 1];
                prop_assert!(own.contains("<!--") && own.contains("-->"));
                prop_assert_eq!(&e.annotations, &parse_line(own));
                for t in &e.annotations.triggers {
                    prop_assert!(own.contains(t.as_str()), "{:?} not on its own line {:?}", t, own);
                }
            }
        }
    }
}
