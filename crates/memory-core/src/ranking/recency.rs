//! Recency among dated notes: when two notes disagree, the newer is the likelier answer, the more so for a
//! question about the present.

use super::{score_spread, Scored};
use crate::discovery::date_from_path;
use crate::types::Source;

/// How far a dated note may move up for being the newest of a search's dated candidates, as a share of the
/// spread of the search's scores (the best minus the tenth best): notes that score within a twentieth of that
/// spread of each other are ordered newest first; clearly better matches are not overtaken. A share of the
/// spread, not of the score, so that models whose similarities bunch (multilingual-e5's 0.75-0.9) and models
/// whose similarities spread out are moved alike.
pub const RECENCY_PREFERENCE: f64 = 0.05;

/// The same for a question about the present ("now", "currently", "现在", "目前"...): there the newer of two
/// notes that disagree is the answer unless the older one is a clearly better match.
pub const RECENCY_PREFERENCE_PRESENT: f64 = 0.2;

/// Words by which a question asks about the present state of things (English and Chinese).
const PRESENT_WORDS: &[&str] = &["now", "currently", "current", "nowadays", "latest", "presently", "today", "anymore", "still"];

const PRESENT_CJK: &[&str] = &["现在", "目前", "当前", "如今", "最新", "眼下", "现今", "还在", "现时", "現在"];

/// Whether a query asks about the present.
pub fn asks_about_present(query: &str) -> bool {
    let lower = query.to_lowercase();
    lower.split(|c: char| !c.is_alphanumeric()).any(|w| PRESENT_WORDS.contains(&w)) || PRESENT_CJK.iter().any(|w| query.contains(w))
}

/// Mild recency among dated notes (daily logs, by the date in their name), with or without temporal decay:
/// when two notes disagree, the newer is the likelier answer. Each dated candidate gains
/// p x spread x (its date - the oldest date) / (the newest - the oldest) over this search's dated candidates,
/// where spread is the best score minus the tenth best (or the last) and p is [`RECENCY_PREFERENCE`] or, for a
/// question about the present, [`RECENCY_PREFERENCE_PRESENT`]. Undated notes and `MEMORY.md` are untouched; so
/// is a search whose dated candidates share one date.
pub fn prefer_recent(items: &mut [Scored], query: &super::Query) {
    let date = |s: &Scored| if s.candidate.source == Source::Memory { date_from_path(&s.candidate.path) } else { None };
    let dates: Vec<i64> = items.iter().filter_map(date).collect();
    let (Some(&oldest), Some(&newest)) = (dates.iter().min(), dates.iter().max()) else { return };
    if newest <= oldest {
        return;
    }
    let Some(spread) = score_spread(items) else { return };
    let p = if query.asks_about_present() { RECENCY_PREFERENCE_PRESENT } else { RECENCY_PREFERENCE };
    let span = (newest - oldest) as f64;
    for s in items.iter_mut() {
        if let Some(d) = date(s) {
            s.score += p * spread * (d - oldest) as f64 / span;
        }
    }
}
