//! Markdown headings and the section a chunk sits in. A chunk cut from the middle of a section loses the heading
//! that says what the section is about ("## Deploys", a daily log's "# 2023-10-13: ..."); the index gives every
//! chunk the headings above it as heading terms, so a question naming the section or the day finds all of it,
//! not only the chunk that happens to hold the heading line.

/// An ATX heading (CommonMark): up to three spaces, one to six `#`, then a space, a tab or the line's end. Returns
/// its level and its text. `#tag` and `#!/bin/sh` are not headings.
pub fn atx_heading(line: &str) -> Option<(usize, &str)> {
    let indent = line.len() - line.trim_start_matches(' ').len();
    if indent > 3 {
        return None;
    }
    let rest = &line[indent..];
    let level = rest.len() - rest.trim_start_matches('#').len();
    if !(1..=6).contains(&level) {
        return None;
    }
    let text = &rest[level..];
    if !text.is_empty() && !text.starts_with([' ', '\t']) {
        return None;
    }
    Some((level, text.trim()))
}

/// A fence line (```` ``` ```` or `~~~`, up to three spaces in): headings inside fenced code are code.
fn is_fence(line: &str) -> bool {
    let t = line.trim_start_matches(' ');
    line.len() - t.len() <= 3 && (t.starts_with("```") || t.starts_with("~~~"))
}

/// Every heading of `text` outside fenced code, in order: (0-based line, level, text).
pub fn headings(text: &str) -> impl Iterator<Item = (usize, usize, &str)> {
    let mut in_fence = false;
    text.split('\n').enumerate().filter_map(move |(i, line)| {
        let line = line.strip_suffix('\r').unwrap_or(line);
        if is_fence(line) {
            in_fence = !in_fence;
            return None;
        }
        if in_fence {
            return None;
        }
        atx_heading(line).map(|(level, h)| (i, level, h))
    })
}

/// For each of `starts` (1-based line numbers, ascending), the headings in force just before that line: the
/// nearest heading above it at each level, outermost first (a heading closes the deeper ones before it).
pub fn headings_above<'a>(text: &'a str, starts: &[usize]) -> Vec<Vec<&'a str>> {
    let mut out = Vec::with_capacity(starts.len());
    let mut stack: Vec<(usize, &str)> = Vec::new();
    let mut all = headings(text).peekable();
    for &start in starts {
        while let Some((_, level, heading)) = all.next_if(|(i, _, _)| i + 1 < start) {
            stack.retain(|(l, _)| *l < level);
            if !heading.is_empty() {
                stack.push((level, heading));
            }
        }
        out.push(stack.iter().map(|(_, h)| *h).collect());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn atx_headings_only() {
        assert_eq!(atx_heading("# Title"), Some((1, "Title")));
        assert_eq!(atx_heading("   ### Deep  "), Some((3, "Deep")));
        assert_eq!(atx_heading("##"), Some((2, "")));
        assert_eq!(atx_heading("#tag"), None);
        assert_eq!(atx_heading("#!/bin/sh"), None);
        assert_eq!(atx_heading("    # indented code"), None);
        assert_eq!(atx_heading("####### seven"), None);
        assert_eq!(atx_heading("plain"), None);
    }

    #[test]
    fn each_start_gets_the_headings_above_it() {
        let text = "# Day\nintro\n## Deploys\ncanary first\n```sh\n# not a heading\n```\nmore\n## Hiring\nplans\n### Q3\nx";
        let got = headings_above(text, &[1, 2, 4, 8, 10, 12, 99]);
        let want: Vec<Vec<&str>> = vec![
            vec![],
            vec!["Day"],
            vec!["Day", "Deploys"],
            vec!["Day", "Deploys"],
            vec!["Day", "Hiring"],
            vec!["Day", "Hiring", "Q3"],
            vec!["Day", "Hiring", "Q3"],
        ];
        assert_eq!(got, want);
    }
}
