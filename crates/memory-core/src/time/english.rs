//! English expressions of time: today, yesterday, the day before yesterday, this/last/next week, weekend, month
//! and year, the past N days, N days/weeks/months/years ago, weekdays (on/last/next/this Tuesday), month names
//! with or without a day and a year, years after a preposition, and since/after/before/until any of these.

use chrono::{Datelike, NaiveDate, Weekday};

use super::{last_units, period, recent_day, recent_month, weekday, DateRange, TimeExpression, Unit, WhichWeekday};

/// A word of the query: lowercased, with its byte span in the query.
struct Word {
    text: String,
    start: usize,
    end: usize,
    /// A date written in digits (`2026-03-04`) is one word, with its days.
    date: Option<DateRange>,
}

/// The query's words; the dates in digits `numeric` found are one word each.
fn words(query: &str, numeric: &[TimeExpression]) -> Vec<Word> {
    let mut out = Vec::new();
    let mut start = None;
    let mut chars = query.char_indices().chain(std::iter::once((query.len(), ' ')));
    while let Some((i, c)) = chars.next() {
        if start.is_none() {
            if let Some(e) = numeric.iter().find(|e| e.span.start == i) {
                out.push(Word { text: query[e.span.clone()].to_string(), start: i, end: e.span.end, date: Some(e.range) });
                // Skip the rest of the date.
                for (j, _) in chars.by_ref() {
                    if j + 1 >= e.span.end {
                        break;
                    }
                }
                continue;
            }
        }
        let part = c.is_alphanumeric() && !super::chinese::is_han(c);
        match (part, start) {
            (true, None) => start = Some(i),
            (false, Some(s)) => {
                out.push(Word { text: query[s..i].to_lowercase(), start: s, end: i, date: None });
                start = None;
            }
            _ => {}
        }
    }
    out
}

const MONTHS: &[&str] = &["january", "february", "march", "april", "may", "june", "july", "august", "september", "october", "november", "december"];
const SHORT_MONTHS: &[&str] = &["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"];

/// Words a month name may follow when it is a month: "in March", "since May".
const BEFORE_MONTH: &[&str] = &[
    "in",
    "since",
    "before",
    "after",
    "during",
    "of",
    "until",
    "till",
    "from",
    "early",
    "late",
    "mid",
    "last",
    "this",
    "next",
    "and",
    "to",
    "by",
    "throughout",
];

const WEEKDAYS: &[(&str, Weekday)] = &[
    ("monday", Weekday::Mon),
    ("tuesday", Weekday::Tue),
    ("wednesday", Weekday::Wed),
    ("thursday", Weekday::Thu),
    ("friday", Weekday::Fri),
    ("saturday", Weekday::Sat),
    ("sunday", Weekday::Sun),
];

fn unit(word: &str) -> Option<Unit> {
    match word {
        "day" | "days" => Some(Unit::Day),
        "week" | "weeks" => Some(Unit::Week),
        "month" | "months" => Some(Unit::Month),
        "year" | "years" => Some(Unit::Year),
        _ => None,
    }
}

/// A count: digits, or a number word up to twelve, or `a`/`an`.
fn count(word: &str) -> Option<i64> {
    const WORDS: &[&str] = &["one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve"];
    if let Some(i) = WORDS.iter().position(|w| *w == word) {
        return Some(i as i64 + 1);
    }
    match word {
        "a" | "an" => Some(1),
        _ if (1..=4).contains(&word.len()) && word.bytes().all(|b| b.is_ascii_digit()) => word.parse().ok(),
        _ => None,
    }
}

fn day_of_month(word: &str) -> Option<u32> {
    let digits = ["st", "nd", "rd", "th"].iter().find_map(|s| word.strip_suffix(s)).unwrap_or(word);
    (digits.len() <= 2 && !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()))
        .then(|| digits.parse().ok())
        .flatten()
        .filter(|d| (1..=31).contains(d))
}

fn year(word: &str) -> Option<i32> {
    (word.len() == 4 && word.bytes().all(|b| b.is_ascii_digit())).then(|| word.parse().ok()).flatten().filter(|y| (1900..=2200).contains(y))
}

/// Reads the words from a position on.
struct Reader<'a> {
    words: &'a [Word],
    today: NaiveDate,
}

impl Reader<'_> {
    fn at(&self, i: usize) -> &str {
        self.words.get(i).map_or("", |w| w.text.as_str())
    }

    /// The month a word names at `i`, if it is one there: full names anywhere (but "may" and "march", which are
    /// also words, only after a word that leads to a month or before a day or a year), short names before a day
    /// or a year.
    fn month_at(&self, i: usize) -> Option<u32> {
        let w = self.at(i);
        let next_is_date = day_of_month(self.at(i + 1)).is_some() || year(self.at(i + 1)).is_some();
        let previous = if i > 0 { self.at(i - 1) } else { "" };
        if let Some(m) = MONTHS.iter().position(|n| *n == w) {
            let ambiguous = matches!(w, "may" | "march");
            if !ambiguous || next_is_date || BEFORE_MONTH.contains(&previous) || (previous == "of" || day_of_month(previous).is_some()) {
                return Some(m as u32 + 1);
            }
            return None;
        }
        let m = SHORT_MONTHS.iter().position(|n| *n == w)? as u32 + 1;
        (next_is_date || day_of_month(previous).is_some()).then_some(m)
    }

    /// A time expression starting at word `i`: its range and how many words it takes.
    fn expression(&self, i: usize) -> Option<(DateRange, usize)> {
        let today = self.today;
        let w = self.at(i);
        // since/after/before/until X, in/on/during X.
        match w {
            "since" | "after" | "before" | "until" | "till" => {
                let (inner, n) = self.point(i + 1)?;
                let range = match w {
                    "since" => Some(inner.since(today)),
                    "after" => inner.after(today),
                    "before" => inner.before(),
                    _ => Some(inner.until()),
                }?;
                return Some((range, n + 1));
            }
            "in" | "on" | "during" | "throughout" => {
                let (inner, n) = self.point(i + 1)?;
                return Some((inner, n + 1));
            }
            _ => {}
        }
        self.point(i)
    }

    /// A point or period of time at word `i` (without a leading since/after/before/in/on).
    fn point(&self, i: usize) -> Option<(DateRange, usize)> {
        let today = self.today;
        let (w, w1, w2) = (self.at(i), self.at(i + 1), self.at(i + 2));
        // "the day before yesterday", "day after tomorrow".
        let at_day = if w == "the" { i + 1 } else { i };
        if self.at(at_day) == "day" && matches!(self.at(at_day + 1), "before" | "after") && matches!(self.at(at_day + 2), "yesterday" | "tomorrow") {
            let n = match (self.at(at_day + 1), self.at(at_day + 2)) {
                ("before", "yesterday") => -2,
                ("after", "tomorrow") => 2,
                _ => return None,
            };
            return Some((period(today, Unit::Day, n)?, at_day + 3 - i));
        }
        if let Some(date) = self.words.get(i).and_then(|w| w.date) {
            return Some((date, 1));
        }
        match w {
            "today" | "tonight" => return Some((DateRange::day(today), 1)),
            "yesterday" => return Some((period(today, Unit::Day, -1)?, 1)),
            "tomorrow" => return Some((period(today, Unit::Day, 1)?, 1)),
            _ => {}
        }
        if w == "this" && matches!(w1, "morning" | "afternoon" | "evening") {
            return Some((DateRange::day(today), 2));
        }
        // "earlier this week".
        if w == "earlier" && w1 == "this" {
            let u = unit(w2).filter(|u| *u != Unit::Day)?;
            let p = period(today, u, 0)?;
            return Some((DateRange { first: p.first, last: today }, 3));
        }
        // "the past week", "the last 3 days", "past two months".
        let at_past = if w == "the" { i + 1 } else { i };
        let taken = at_past - i;
        match (self.at(at_past), self.at(at_past + 1), self.at(at_past + 2)) {
            ("past", u, _) if unit(u).is_some() => return Some((last_units(today, unit(u)?, 1)?, taken + 2)),
            ("past" | "last" | "previous", n, u) if !matches!(n, "a" | "an") && count(n).is_some() && unit(u).is_some() => {
                return Some((last_units(today, unit(u)?, count(n)?)?, taken + 3));
            }
            _ => {}
        }
        // this/last/next week, month, year, weekend; last/next/this Tuesday; last March.
        let shift = match w {
            "this" | "current" => Some(0),
            "last" | "previous" => Some(-1),
            "next" | "coming" => Some(1),
            _ => None,
        };
        if let Some(n) = shift {
            if let Some(u) = unit(w1).filter(|u| *u != Unit::Day) {
                return Some((period(today, u, n)?, 2));
            }
            if w1 == "weekend" {
                let week = period(today, Unit::Week, n)?;
                return Some((DateRange::weekend_of(week.first), 2));
            }
            if let Some((_, day)) = WEEKDAYS.iter().find(|(name, _)| *name == w1) {
                let which = match n {
                    0 => WhichWeekday::InWeek(0),
                    -1 => WhichWeekday::Last,
                    _ => WhichWeekday::Next,
                };
                return Some((weekday(today, *day, which)?, 2));
            }
            if let Some(m) = MONTHS.iter().position(|name| *name == w1).map(|m| m as u32 + 1) {
                // Last March: the most recent March before this month; next March: the first after it.
                let y = today.year();
                let range = match n {
                    0 => DateRange::month(y, m)?,
                    -1 => DateRange::month(if m < today.month() { y } else { y - 1 }, m)?,
                    _ => DateRange::month(if m > today.month() { y } else { y + 1 }, m)?,
                };
                return Some((range, 2));
            }
        }
        // N units ago; "a couple of days ago", "a few weeks ago".
        let (n, at_unit) = match (w, w1, w2) {
            ("a", "couple", "of") => (Some(2), i + 3),
            ("a", "few", _) => (Some(3), i + 2),
            ("couple", "of", _) => (Some(2), i + 2),
            _ => (count(w), i + 1),
        };
        if let (Some(n), Some(u)) = (n, unit(self.at(at_unit))) {
            if self.at(at_unit + 1) == "ago" {
                return Some((period(today, u, -n)?, at_unit + 2 - i));
            }
        }
        // Weekdays alone: the most recent.
        if let Some((_, day)) = WEEKDAYS.iter().find(|(name, _)| *name == w) {
            return Some((weekday(today, *day, WhichWeekday::Recent)?, 1));
        }
        // A day of a month: "March 3", "March 3rd, 2026", "3 March 2026", "the 3rd of March".
        let at_d = if w == "the" { i + 1 } else { i };
        if let Some(d) = day_of_month(self.at(at_d)) {
            let at_m = if self.at(at_d + 1) == "of" { at_d + 2 } else { at_d + 1 };
            if let Some(m) = self.month_at(at_m) {
                return self.with_year(m, Some(d), at_m + 1).map(|(r, end)| (r, end - i));
            }
        }
        if let Some(m) = self.month_at(i) {
            if let Some(d) = day_of_month(w1) {
                return self.with_year(m, Some(d), i + 2).map(|(r, end)| (r, end - i));
            }
            let at_y = if w1 == "of" { i + 2 } else { i + 1 };
            if let Some(y) = year(self.at(at_y)) {
                return Some((DateRange::month(y, m)?, at_y + 1 - i));
            }
            return Some((recent_month(today, m)?, 1));
        }
        // A year alone counts only after a word that makes it one ("in 2025"): handled by the caller's preposition.
        if i > 0 && matches!(self.at(i - 1), "in" | "since" | "before" | "after" | "during" | "until" | "till" | "throughout" | "of") {
            if let Some(y) = year(w) {
                return Some((DateRange::year(y)?, 1));
            }
        }
        None
    }

    /// A month's day (or the whole month), with the year at word `at` if one is there, else the most recent.
    /// Returns the range and the index after the last word taken.
    fn with_year(&self, month: u32, day: Option<u32>, at: usize) -> Option<(DateRange, usize)> {
        match (year(self.at(at)), day) {
            (Some(y), Some(d)) => Some((DateRange::day(NaiveDate::from_ymd_opt(y, month, d)?), at + 1)),
            (Some(y), None) => Some((DateRange::month(y, month)?, at + 1)),
            (None, Some(d)) => Some((recent_day(self.today, month, d)?, at)),
            (None, None) => Some((recent_month(self.today, month)?, at)),
        }
    }
}

/// The expressions of `query`; `numeric` holds its dates in digits (read as words here, so "before 2026-03-10" is
/// one expression).
pub(super) fn find(query: &str, today: NaiveDate, numeric: &[TimeExpression]) -> Vec<TimeExpression> {
    let words = words(query, numeric);
    let reader = Reader { words: &words, today };
    let mut out = Vec::new();
    let mut i = 0;
    while i < words.len() {
        match reader.expression(i) {
            Some((range, n)) if n > 0 => {
                let last = &words[(i + n - 1).min(words.len() - 1)];
                out.push(TimeExpression { range, span: words[i].start..last.end });
                i += n;
            }
            _ => i += 1,
        }
    }
    out
}
