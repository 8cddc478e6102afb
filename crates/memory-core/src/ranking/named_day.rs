//! A question that names a calendar day ("on October 13, 2023", "13 June 2023", "2023-10-13", "2023年10月13日")
//! is about that day: the daily log of the day (`memory/2023-10-13.md`, by the date in its name) holds the answer
//! more often than any other note, in any of its chunks, not only the one whose heading line holds the date. Those
//! candidates move up by a share of the search's score spread ([`prefer_named_days`]).

use super::Scored;
use crate::discovery::{date_from_path, day_millis};
use crate::Source;

/// How far a candidate from a day the query names moves up, as a share of the search's score spread (the best
/// minus the tenth best): enough to lead a search its words alone left close, not to lift a note that matches
/// nothing else over clear matches.
pub const NAMED_DAY_PREFERENCE: f64 = 0.5;

const MONTHS: &[(&str, u32)] = &[
    ("january", 1),
    ("jan", 1),
    ("february", 2),
    ("feb", 2),
    ("march", 3),
    ("mar", 3),
    ("april", 4),
    ("apr", 4),
    ("may", 5),
    ("june", 6),
    ("jun", 6),
    ("july", 7),
    ("jul", 7),
    ("august", 8),
    ("aug", 8),
    ("september", 9),
    ("sept", 9),
    ("sep", 9),
    ("october", 10),
    ("oct", 10),
    ("november", 11),
    ("nov", 11),
    ("december", 12),
    ("dec", 12),
];

/// At most this many days are taken from one query (a pasted calendar is not a question about each day).
const MAX_DAYS: usize = 8;

fn month(word: &str) -> Option<u32> {
    MONTHS.iter().find(|(name, _)| *name == word).map(|(_, m)| *m)
}

/// A day of the month, `13` or `13th`.
fn day(word: &str) -> Option<u32> {
    let digits = word
        .strip_suffix("st")
        .or_else(|| word.strip_suffix("nd"))
        .or_else(|| word.strip_suffix("rd"))
        .or_else(|| word.strip_suffix("th"))
        .unwrap_or(word);
    (digits.len() <= 2 && digits.bytes().all(|b| b.is_ascii_digit())).then(|| digits.parse().ok()).flatten().filter(|d| (1..=31).contains(d))
}

fn year(word: &str) -> Option<i32> {
    (word.len() == 4 && word.bytes().all(|b| b.is_ascii_digit())).then(|| word.parse().ok()).flatten()
}

fn millis(y: i32, m: u32, d: u32) -> Option<i64> {
    day_millis(chrono::NaiveDate::from_ymd_opt(y, m, d)?)
}

/// The days `query` names with their year, as the midnight UTC milliseconds [`date_from_path`] gives a note.
pub fn named_days(query: &str) -> Vec<i64> {
    let mut out = Vec::new();
    let lower = query.to_lowercase();
    // ISO and CJK forms: digits separated by `-`, `/`, `.` or 年/月/日.
    let mut numbers: Vec<(usize, &str)> = Vec::new();
    let mut start = None;
    for (i, c) in lower.char_indices() {
        match (c.is_ascii_digit(), start) {
            (true, None) => start = Some(i),
            (false, Some(s)) => {
                numbers.push((s, &lower[s..i]));
                start = None;
            }
            _ => {}
        }
    }
    if let Some(s) = start {
        numbers.push((s, &lower[s..]));
    }
    for w in numbers.windows(3) {
        let [(ya, y), (ma, m), (da, d)] = [w[0], w[1], w[2]];
        let between = |a: usize, a_len: usize, b: usize| lower[a + a_len..b].trim();
        let seps_ok = [between(ya, y.len(), ma), between(ma, m.len(), da)].iter().all(|s| matches!(*s, "-" | "/" | "." | "年" | "月"));
        if let (true, Some(y), Ok(m), Ok(d)) = (seps_ok, year(y), m.parse::<u32>(), d.parse::<u32>()) {
            out.extend(millis(y, m, d));
        }
    }
    // Words: "October 13, 2023", "Oct 13th 2023", "13 October, 2023", "13th of October 2023".
    let words: Vec<&str> = lower.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()).collect();
    for (i, w) in words.iter().enumerate() {
        let Some(m) = month(w) else { continue };
        let after = |k: usize| words.get(i + k).copied().unwrap_or("");
        if let (Some(d), Some(y)) = (day(after(1)), year(after(2))) {
            out.extend(millis(y, m, d));
            continue;
        }
        let before = |k: usize| if i >= k { words[i - k] } else { "" };
        let d = if before(1) == "of" { day(before(2)) } else { day(before(1)) };
        if let (Some(d), Some(y)) = (d, year(after(1))) {
            out.extend(millis(y, m, d));
        }
    }
    out.sort_unstable();
    out.dedup();
    out.truncate(MAX_DAYS);
    out
}

/// Move the candidates from a day `query` names up by [`NAMED_DAY_PREFERENCE`] of the spread of the scores.
pub fn prefer_named_days(items: &mut [Scored], query: &super::Query) {
    let days = query.named_days();
    if days.is_empty() {
        return;
    }
    let Some(spread) = super::score_spread(items) else { return };
    for s in items.iter_mut() {
        if s.candidate.source == Source::Memory && date_from_path(&s.candidate.path).is_some_and(|d| days.contains(&d)) {
            s.score += NAMED_DAY_PREFERENCE * spread;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn day_of(y: i32, m: u32, d: u32) -> i64 {
        millis(y, m, d).unwrap()
    }

    #[test]
    fn the_ways_a_question_names_a_day() {
        let oct13 = vec![day_of(2023, 10, 13)];
        for q in [
            "What painting did Melanie show on October 13, 2023?",
            "what happened on oct 13th 2023",
            "plans for 13 October, 2023",
            "the 13th of October 2023",
            "notes from 2023-10-13",
            "2023/10/13 standup",
            "2023年10月13日的会议",
        ] {
            assert_eq!(named_days(q), oct13, "{q}");
        }
    }

    #[test]
    fn no_day_without_a_year_or_a_real_date() {
        for q in ["on October 13", "May 5 people come", "2023-02-30", "version 1.2.3", "13 of 2023", "in 2023", "call 555-1234-5678"] {
            assert!(named_days(q).is_empty(), "{q}");
        }
    }
}
