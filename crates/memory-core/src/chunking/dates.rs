//! The day each chunk of a note is of: what a question's time ("last week") and a search's `after`/`before` are
//! compared with.
//!
//! A daily log (`memory/2026-03-04.md`) is of the day in its name; any other note of the date its YAML front matter
//! gives (`date: 2026-03-04` between `---` lines at the top). Inside a note, a heading that begins with a date
//! (`## 2026-03-04`, `### 2026-03-04 standup`) dates the lines under it, down to the next dated heading: a running
//! log kept in one file is dated section by section, and the chunker starts a chunk at each such heading, so a
//! chunk is of one day. A chunk takes the date of the section its first line is in. (A transcript's chunk is of
//! the day its first message was written: `sessions::Flattened::days`.)

use crate::discovery::{date_from_path, parse_day};

/// How far into a note its front matter is looked for.
const FRONT_MATTER_MAX_LINES: usize = 64;

/// The day `text` begins with.
fn iso_day(text: &str) -> Option<i64> {
    parse_day(text.get(..10)?)
}

/// The date a note's YAML front matter gives (`date:`, `created:`), if it has one.
fn front_matter_date(text: &str) -> Option<i64> {
    let mut lines = text.lines();
    if lines.next()?.trim_start_matches('\u{feff}').trim_end() != "---" {
        return None;
    }
    for line in lines.take(FRONT_MATTER_MAX_LINES) {
        let line = line.trim_end();
        if line == "---" || line == "..." {
            return None;
        }
        for key in ["date:", "created:"] {
            if let Some(value) = line.strip_prefix(key) {
                let value = value.trim().trim_matches(|c| c == '"' || c == '\'');
                if let Some(d) = iso_day(value) {
                    return Some(d);
                }
            }
        }
    }
    None
}

/// Whether `line` is a heading that begins with a date: where a chunk of a running log starts.
pub fn is_dated_heading(line: &str) -> bool {
    line.trim_start().starts_with('#') && heading_date(line).is_some()
}

/// The date a heading line begins with (`## 2026-03-04`, `# 2026-03-04: standup`), if it is one.
fn heading_date(line: &str) -> Option<i64> {
    let rest = line.trim_start().strip_prefix('#')?;
    let rest = rest.trim_start_matches('#');
    if !rest.starts_with(' ') {
        return None;
    }
    let rest = rest.trim_start();
    // The date is the heading's first word: `2026-03-04` and not `2026-03-045`.
    let after = rest.get(10..11).and_then(|s| s.chars().next());
    if after.is_some_and(|c| c.is_ascii_alphanumeric()) {
        return None;
    }
    iso_day(rest)
}

/// The dates of a note's lines: the note's own (its name's, else its front matter's) and, where a dated heading
/// starts a section, that heading's for the lines from it on.
#[derive(Debug, Clone, Default)]
pub struct NoteDates {
    note: Option<i64>,
    /// (1-based line, date) of each dated heading, in line order.
    sections: Vec<(usize, i64)>,
}

impl NoteDates {
    /// Read the dates of the note at index path `path` with content `text` (one pass over its lines).
    pub fn of(path: &str, text: &str) -> NoteDates {
        let note = date_from_path(path).or_else(|| front_matter_date(text));
        let sections = text.lines().enumerate().filter_map(|(i, line)| heading_date(line).map(|d| (i + 1, d))).collect();
        NoteDates { note, sections }
    }

    /// The date of the chunk whose first line is `start_line` (1-based).
    pub fn at(&self, start_line: usize) -> Option<i64> {
        let section = self.sections.iter().take_while(|(line, _)| *line <= start_line).last().map(|(_, d)| *d);
        section.or(self.note)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn day(s: &str) -> Option<i64> {
        iso_day(s)
    }

    #[test]
    fn a_daily_log_is_of_its_day_and_dated_headings_date_their_sections() {
        let log = NoteDates::of("memory/2026-03-04.md", "# 2026-03-04\n\n- standup\n");
        assert_eq!(log.at(1), day("2026-03-04"));
        assert_eq!(log.at(3), day("2026-03-04"));
        let running = "# Journal\n\nintro\n## 2026-03-01 Sunday\n- a\n## 2026-03-02\n- b\n";
        let dates = NoteDates::of("notes/journal.md", running);
        assert_eq!(dates.at(1), None);
        assert_eq!(dates.at(3), None);
        assert_eq!(dates.at(4), day("2026-03-01"));
        assert_eq!(dates.at(5), day("2026-03-01"));
        assert_eq!(dates.at(7), day("2026-03-02"));
    }

    #[test]
    fn front_matter_dates_a_note_and_only_at_the_top() {
        let note = "---\ntitle: Trip\ndate: \"2025-09-14\"\n---\n# Trip\n";
        assert_eq!(NoteDates::of("notes/trip.md", note).at(5), day("2025-09-14"));
        assert_eq!(NoteDates::of("notes/trip.md", "\u{feff}---\ncreated: 2025-09-14T10:00:00Z\n---\n").at(1), day("2025-09-14"));
        assert_eq!(NoteDates::of("notes/x.md", "# x\n---\ndate: 2025-09-14\n---\n").at(1), None);
        assert_eq!(NoteDates::of("notes/x.md", "---\ntitle: x\n---\ndate: 2025-09-14\n").at(1), None);
    }

    #[test]
    fn only_a_heading_that_begins_with_a_real_date_is_one() {
        for line in ["## 2026-03-04", "# 2026-03-04: standup", "### 2026-03-04 (Wed)"] {
            assert_eq!(heading_date(line), day("2026-03-04"), "{line}");
        }
        for line in ["2026-03-04", "##2026-03-04", "## notes 2026-03-04", "## 2026-02-30", "## 2026-03-045", "## v2026-03-04", "#"] {
            assert_eq!(heading_date(line), None, "{line}");
        }
    }
}
