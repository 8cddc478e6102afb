//! Time in a question: the expressions that say *when* ("yesterday", "last week", "two months ago", "in March",
//! "since 2026-03-01", "上周", "三天前", "2026年3月"), found in English and Chinese and resolved against the day
//! the question is asked into date ranges ([`find`]). The ranking prefers notes dated inside them that hold the rest
//! of the question (`ranking::window`): "what did I decide last week" finds the decision in last week's log before
//! the decisions of other weeks.
//!
//! Resolution is calendar arithmetic on the asking day: weeks run Monday to Sunday, "last Tuesday" is the most
//! recent Tuesday before today, a month without a year is its most recent occurrence, "N weeks ago" is the week
//! holding the day N weeks back. A question with no expression finds nothing and ranks as before.

use std::ops::Range;

use chrono::{Datelike, Duration, NaiveDate, Weekday};

mod chinese;
mod english;
mod numeric;

#[cfg(test)]
mod tests;

/// Days from `first` to `last`, both included.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DateRange {
    pub first: NaiveDate,
    pub last: NaiveDate,
}

/// One expression of time in a query: the days it means and the bytes of the query that said it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TimeExpression {
    pub range: DateRange,
    pub span: Range<usize>,
}

/// At most this many expressions are taken from one query (a pasted calendar is not a question about each day).
pub const MAX_EXPRESSIONS: usize = 8;

/// The earliest day an open range ("before March") reaches back to.
fn epoch() -> NaiveDate {
    NaiveDate::from_ymd_opt(1970, 1, 1).unwrap_or(NaiveDate::MIN)
}

impl DateRange {
    pub fn day(d: NaiveDate) -> DateRange {
        DateRange { first: d, last: d }
    }

    pub fn contains(&self, d: NaiveDate) -> bool {
        self.first <= d && d <= self.last
    }

    /// Monday to Sunday of the week holding `d`.
    fn week_of(d: NaiveDate) -> DateRange {
        let monday = d - Duration::days(i64::from(d.weekday().num_days_from_monday()));
        DateRange { first: monday, last: monday + Duration::days(6) }
    }

    /// Saturday and Sunday of the week holding `d`.
    fn weekend_of(d: NaiveDate) -> DateRange {
        let week = DateRange::week_of(d);
        DateRange { first: week.last - Duration::days(1), last: week.last }
    }

    fn month(year: i32, month: u32) -> Option<DateRange> {
        let first = NaiveDate::from_ymd_opt(year, month, 1)?;
        let next = if month == 12 { NaiveDate::from_ymd_opt(year + 1, 1, 1)? } else { NaiveDate::from_ymd_opt(year, month + 1, 1)? };
        Some(DateRange { first, last: next - Duration::days(1) })
    }

    fn year(year: i32) -> Option<DateRange> {
        Some(DateRange { first: NaiveDate::from_ymd_opt(year, 1, 1)?, last: NaiveDate::from_ymd_opt(year, 12, 31)? })
    }

    /// The last `n` days up to and including `today`.
    fn last_days(today: NaiveDate, n: i64) -> DateRange {
        DateRange { first: today - Duration::days(n), last: today }
    }

    /// From this range's first day up to `today` ("since March").
    fn since(self, today: NaiveDate) -> DateRange {
        DateRange { first: self.first, last: today.max(self.first) }
    }

    /// After this range, up to `today` ("after March"); `None` when that is empty.
    fn after(self, today: NaiveDate) -> Option<DateRange> {
        let first = self.last.succ_opt()?;
        (first <= today).then_some(DateRange { first, last: today })
    }

    /// Everything before this range ("before March").
    fn before(self) -> Option<DateRange> {
        let last = self.first.pred_opt()?;
        (epoch() <= last).then_some(DateRange { first: epoch(), last })
    }

    /// Everything up to the end of this range ("until March").
    fn until(self) -> DateRange {
        DateRange { first: epoch(), last: self.last }
    }
}

/// The calendar unit an expression counts in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Unit {
    Day,
    Week,
    Month,
    Year,
}

/// The unit's period holding the day `n` units from `today` (negative: back): "3 weeks ago" is the week holding
/// the day 21 days back, "last month" the calendar month before this one.
fn period(today: NaiveDate, unit: Unit, n: i64) -> Option<DateRange> {
    match unit {
        Unit::Day => Some(DateRange::day(today.checked_add_signed(Duration::days(n))?)),
        Unit::Week => Some(DateRange::week_of(today.checked_add_signed(Duration::weeks(n))?)),
        Unit::Month => {
            let months = i64::from(today.year()) * 12 + i64::from(today.month0()) + n;
            DateRange::month(i32::try_from(months.div_euclid(12)).ok()?, u32::try_from(months.rem_euclid(12)).ok()? + 1)
        }
        Unit::Year => DateRange::year(today.year().checked_add(i32::try_from(n).ok()?)?),
    }
}

/// The last `n` units up to today ("the past 3 weeks", "最近三天").
fn last_units(today: NaiveDate, unit: Unit, n: i64) -> Option<DateRange> {
    let days = match unit {
        Unit::Day => n,
        Unit::Week => n.checked_mul(7)?,
        Unit::Month => n.checked_mul(30)?,
        Unit::Year => n.checked_mul(365)?,
    };
    (0..=36_500).contains(&days).then(|| DateRange::last_days(today, days))
}

/// The most recent `month` (1..=12) on or before today's month: "in March" asked in May is this year's March,
/// asked in January last year's.
fn recent_month(today: NaiveDate, month: u32) -> Option<DateRange> {
    let year = if month <= today.month() { today.year() } else { today.year() - 1 };
    DateRange::month(year, month)
}

/// The most recent `month`/`day` on or before today.
fn recent_day(today: NaiveDate, month: u32, day: u32) -> Option<DateRange> {
    let this_year = NaiveDate::from_ymd_opt(today.year(), month, day);
    match this_year {
        Some(d) if d <= today => Some(DateRange::day(d)),
        _ => NaiveDate::from_ymd_opt(today.year() - 1, month, day).map(DateRange::day),
    }
}

/// Which of a weekday's occurrences an expression means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum WhichWeekday {
    /// "Tuesday", "on Tuesday", "周二": the most recent, today included.
    Recent,
    /// "last Tuesday": the most recent before today.
    Last,
    /// "next Tuesday": the first after today.
    Next,
    /// "上周二", "this Tuesday": the one in the week `n` weeks from this one.
    InWeek(i64),
}

fn weekday(today: NaiveDate, day: Weekday, which: WhichWeekday) -> Option<DateRange> {
    let back = i64::from((7 + today.weekday().num_days_from_monday() - day.num_days_from_monday()) % 7);
    let d = match which {
        WhichWeekday::Recent => today - Duration::days(back),
        WhichWeekday::Last => today - Duration::days(if back == 0 { 7 } else { back }),
        WhichWeekday::Next => today + Duration::days(7 - back),
        WhichWeekday::InWeek(n) => {
            DateRange::week_of(today.checked_add_signed(Duration::weeks(n))?).first + Duration::days(i64::from(day.num_days_from_monday()))
        }
    };
    Some(DateRange::day(d))
}

/// The time expressions of `query` asked on `today`, in query order, none overlapping another (the longer one
/// wins), at most [`MAX_EXPRESSIONS`].
pub fn find(query: &str, today: NaiveDate) -> Vec<TimeExpression> {
    let mut found = numeric::find(query, today);
    let english = english::find(query, today, &found);
    found.extend(english);
    found.extend(chinese::find(query, today));
    // Longest first, then earliest: a shorter expression inside a longer one ("March" in "since March 2026",
    // "2026-03-04" read as a month too) is dropped.
    found.sort_by(|a, b| (b.span.len(), a.span.start).cmp(&(a.span.len(), b.span.start)));
    let mut kept: Vec<TimeExpression> = Vec::new();
    for e in found {
        if !kept.iter().any(|k| k.span.start < e.span.end && e.span.start < k.span.end) {
            kept.push(e);
        }
    }
    kept.sort_by_key(|e| e.span.start);
    kept.truncate(MAX_EXPRESSIONS);
    kept
}

/// The query without the bytes its time expressions take (each replaced by one space): "what did I decide last
/// week" is "what did I decide" and a time.
pub fn without_expressions(query: &str, found: &[TimeExpression]) -> String {
    let mut out = String::with_capacity(query.len());
    let mut at = 0;
    for e in found {
        if e.span.start < at || e.span.end > query.len() {
            continue;
        }
        out.push_str(&query[at..e.span.start]);
        out.push(' ');
        at = e.span.end;
    }
    out.push_str(&query[at..]);
    out
}

pub use memory_contract::dates::{clock, now};
