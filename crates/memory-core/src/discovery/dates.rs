//! Dates named by daily logs' paths (`memory/YYYY-MM-DD.md`), and the notes that never age (evergreen).

use super::is_root_memory_name;

/// The date in a daily-log file name (`YYYY-MM-DD.md` or `YYYY-MM-DD-<slug>.md`), as Unix ms at 00:00 UTC.
pub fn date_from_path(key: &str) -> Option<i64> {
    let name = key.rsplit('/').next()?;
    let stem = name.strip_suffix(".md").or_else(|| name.strip_suffix(".MD"))?;
    // `get`, not indexing: byte 10 of a name in another script is inside a character.
    let (date, rest) = (stem.get(..10)?, stem.get(10..)?);
    if !(rest.is_empty() || rest.starts_with('-')) {
        return None;
    }
    parse_day(date)
}

/// A `YYYY-MM-DD` day (exactly that text) as [`day_millis`] gives it; `None` for anything else.
pub fn parse_day(text: &str) -> Option<i64> {
    day_millis(chrono::NaiveDate::parse_from_str(text, "%Y-%m-%d").ok()?)
}

/// A day as [`date_from_path`] gives a dated note: its midnight UTC, in milliseconds (what a question's named day
/// is compared with, `ranking::window`).
pub fn day_millis(day: chrono::NaiveDate) -> Option<i64> {
    Some(day.and_hms_opt(0, 0, 0)?.and_utc().timestamp_millis())
}

/// True for files that never decay: `MEMORY.md`/`memory.md` and undated notes under `memory/`.
pub fn is_evergreen(key: &str) -> bool {
    if is_root_memory_name(key) {
        return true;
    }
    key.starts_with("memory/") && date_from_path(key).is_none()
}
