//! Dates written in digits: `2026-03-04`, `2026/03/04`, `2026.03.04` (a day) and `2026-03` (a month).

use chrono::NaiveDate;

use super::{DateRange, TimeExpression};

/// A run of ASCII digits and its byte span.
fn digit_runs(text: &str) -> Vec<(usize, usize)> {
    let bytes = text.as_bytes();
    let mut runs = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i].is_ascii_digit() {
            let start = i;
            while i < bytes.len() && bytes[i].is_ascii_digit() {
                i += 1;
            }
            runs.push((start, i));
        } else {
            i += 1;
        }
    }
    runs
}

pub(super) fn find(query: &str, _today: NaiveDate) -> Vec<TimeExpression> {
    let runs = digit_runs(query);
    let bytes = query.as_bytes();
    let number = |(s, e): (usize, usize)| query[s..e].parse::<u32>().ok();
    // The one separator byte between two runs, if they are one byte apart.
    let sep = |a: (usize, usize), b: (usize, usize)| (b.0 == a.1 + 1).then(|| bytes[a.1]).filter(|c| matches!(c, b'-' | b'/' | b'.'));
    let mut out = Vec::new();
    let mut i = 0;
    while i < runs.len() {
        let y = runs[i];
        // A year is four digits not glued to a letter or another number ("v2026-03" is not a month).
        let glued = y.0 > 0 && (bytes[y.0 - 1].is_ascii_alphanumeric() || bytes[y.0 - 1] == b'.');
        if y.1 - y.0 != 4 || glued {
            i += 1;
            continue;
        }
        let Some(year) = number(y).and_then(|n| i32::try_from(n).ok()) else {
            i += 1;
            continue;
        };
        let Some(&m) = runs.get(i + 1) else { break };
        let Some(s1) = sep(y, m).filter(|_| m.1 - m.0 <= 2) else {
            i += 1;
            continue;
        };
        let day = runs.get(i + 2).copied().filter(|&d| sep(m, d) == Some(s1) && d.1 - d.0 <= 2);
        let range = match (number(m), day.and_then(number)) {
            (Some(month), Some(d)) => NaiveDate::from_ymd_opt(year, month, d).map(DateRange::day),
            // A month alone only with a dash (`2026-03`; `2026/3` or `2026.3` read as other things too).
            (Some(month), None) if s1 == b'-' && !query[m.1..].starts_with(|c: char| c.is_ascii_alphanumeric()) => DateRange::month(year, month),
            _ => None,
        };
        let end = day.map_or(m.1, |d| d.1);
        if let Some(range) = range {
            out.push(TimeExpression { range, span: y.0..end });
            i += if day.is_some() { 3 } else { 2 };
        } else {
            i += 1;
        }
    }
    out
}
