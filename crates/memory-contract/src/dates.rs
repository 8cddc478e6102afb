//! Days and the clock, as every part reads them: a `YYYY-MM-DD` day as its midnight UTC in Unix milliseconds (what
//! daily logs, dated headings, `after`/`before` and a question's named days are compared in), a range of such
//! days, and what "now" is for a search.
#![deny(missing_docs)]

use chrono::NaiveDate;

/// A `YYYY-MM-DD` day (exactly that text) as [`day_millis`] gives it; `None` for anything else.
pub fn parse_day(text: &str) -> Option<i64> {
    day_millis(NaiveDate::parse_from_str(text, "%Y-%m-%d").ok()?)
}

/// A day as a dated note holds it: its midnight UTC, in milliseconds.
pub fn day_millis(day: NaiveDate) -> Option<i64> {
    Some(day.and_hms_opt(0, 0, 0)?.and_utc().timestamp_millis())
}

/// Days from `first` to `last`, both included, each as its midnight UTC in Unix milliseconds ([`day_millis`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DayRange {
    /// The first day (`i64::MIN`: open).
    pub first: i64,
    /// The last day (`i64::MAX`: open).
    pub last: i64,
}

impl DayRange {
    /// Whether the day `date` is inside.
    pub fn contains(&self, date: i64) -> bool {
        self.first <= date && date <= self.last
    }
}

/// What "now" is for the ranking: the `memory.search.query.now` setting when given (a date `2026-03-04`, or a
/// date and time with an offset `2026-03-04T21:30:00+08:00`, read in that offset), else the clock in this
/// machine's time zone. Returns the day questions are asked on and the instant in Unix milliseconds.
pub fn now(setting: Option<&str>) -> Result<(NaiveDate, i64), String> {
    match setting.map(str::trim) {
        None | Some("") => Ok(clock()),
        Some(s) => {
            if let Ok(t) = chrono::DateTime::parse_from_rfc3339(s) {
                return Ok((t.date_naive(), t.timestamp_millis()));
            }
            let day = NaiveDate::parse_from_str(s, "%Y-%m-%d")
                .map_err(|_| format!("`{s}` is not a date (2026-03-04) or a date and time with an offset (2026-03-04T21:30:00+08:00)"))?;
            // Noon UTC: the whole day is "today" for the decay of any note dated that day.
            let ms = day.and_hms_opt(12, 0, 0).map(|t| t.and_utc().timestamp_millis()).ok_or_else(|| format!("`{s}` is out of range"))?;
            Ok((day, ms))
        }
    }
}

/// The clock: today in this machine's time zone, and the instant in Unix milliseconds.
pub fn clock() -> (NaiveDate, i64) {
    let local = chrono::Local::now();
    (local.date_naive(), local.timestamp_millis())
}
