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

pub use memory_contract::dates::{day_millis, parse_day};

/// True for files that never decay: `MEMORY.md`/`memory.md` and undated notes under `memory/`.
pub fn is_evergreen(key: &str) -> bool {
    if is_root_memory_name(key) {
        return true;
    }
    key.starts_with("memory/") && date_from_path(key).is_none()
}
