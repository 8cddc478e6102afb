//! A question that says when ("on October 13, 2023", "last week", "三月", "two days ago": [`crate::time`]) is about
//! the notes of that time: a note dated inside it (a daily log `memory/2023-10-13.md` by the date in its name, a
//! note by its front matter, a section by its dated heading: [`crate::chunking::dates`]) holds the answer more
//! often than any other note, in any of its chunks, not only the one whose heading line holds the date. Those
//! candidates move up by a multiple of the search's score spread ([`prefer_dated_in_window`]).

use chrono::NaiveDate;

use super::Scored;
use crate::discovery::date_from_path;
use crate::Source;

/// How far a candidate dated inside the query's time moves up, as a multiple of the search's score spread (the
/// best minus the tenth best) times the share of the rest of the question it holds ([`super::Query::undated_words`]):
/// a note of that time that holds all of it leads the notes of other times that hold it as well (the time is what
/// tells them apart), one that holds half of it moves half as far, and one that holds none of it does not move.
pub const WINDOW_PREFERENCE: f64 = 2.0;

/// The day a candidate is of: its chunk's ([`crate::chunking::dates`]), else (an index written before chunks were
/// dated) a daily log's by the date in its name.
pub fn candidate_day(s: &Scored) -> Option<NaiveDate> {
    let c = &s.candidate;
    let ms = c.date.or_else(|| if c.source == Source::Memory { date_from_path(&c.path) } else { None })?;
    chrono::DateTime::from_timestamp_millis(ms).map(|t| t.date_naive())
}

/// Move the candidates dated inside one of the query's time ranges up by [`WINDOW_PREFERENCE`] x the spread of the
/// scores x the share of the question's other words they hold, counting only the words some candidate holds: a
/// word no note of the search holds ("what *happened* yesterday") tells no note from another.
///
/// The words that say when stay search words too: conversations and logs say "last week" and "on 13 October,
/// 2023" in their text, and a note that says it is likelier the one asked about (taking them out of the keyword
/// query lost answers on conversations, docs/BENCHMARKS.md).
pub fn prefer_dated_in_window(items: &mut [Scored], query: &super::Query) {
    let ranges = query.time();
    let inside: Vec<bool> = items.iter().map(|s| candidate_day(s).is_some_and(|d| ranges.iter().any(|e| e.range.contains(d)))).collect();
    // No candidate of that time (or no time): nothing moves, and no candidate's words need reading.
    if !inside.contains(&true) {
        return;
    }
    // Candidates that all score alike (a small workspace where each note matches the same words once) have no
    // spread: there the time alone tells them apart, moved by the best score instead.
    let best = items.iter().map(|s| s.score).filter(|v| v.is_finite()).fold(0.0_f64, f64::max);
    let Some(spread) = super::score_spread(items).or((best > 0.0).then_some(best)) else { return };
    let words = query.undated_words();
    let held: Vec<Vec<bool>> = items.iter().map(|s| words.held_by(&s.candidate.text)).collect();
    // The words some candidate holds, in or out of the time.
    let spoken_of: Vec<bool> = (0..held.first().map_or(0, Vec::len)).map(|i| held.iter().any(|h| h[i])).collect();
    let counted = spoken_of.iter().filter(|h| **h).count();
    for ((s, held), inside) in items.iter_mut().zip(held).zip(inside) {
        if !inside {
            continue;
        }
        let share =
            if counted == 0 { 1.0 } else { held.iter().zip(&spoken_of).filter(|(h, spoken)| **h && **spoken).count() as f64 / counted as f64 };
        s.score += WINDOW_PREFERENCE * spread * share;
    }
}
