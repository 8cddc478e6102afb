//! The day a QMD hit is of, for `after`/`before`: QMD keeps no dates, so the hit's file is read (once per search,
//! within `maxFileBytes`) and dated as the indexed engines date a chunk: a memory file by its name, front matter
//! or the dated heading above the hit's lines ([`NoteDates`]); a transcript by the `timestamp` of the first
//! message of the hit ([`memory_core::sessions::flatten`]).

use std::collections::HashMap;

use memory_core::chunking::dates::NoteDates;
use memory_core::discovery::read_text;
use memory_core::{SearchResult, Source};

use super::Inner;

/// What one file says about the days of its lines.
enum FileDates {
    Note(NoteDates),
    /// A transcript: (JSONL line, day) of each message, in line order.
    Transcript(Vec<(usize, Option<i64>)>),
}

/// The files one search has dated so far, and why those it could not read stay undated.
pub(super) struct HitDates<'a> {
    inner: &'a Inner,
    files: HashMap<(Source, String), Result<FileDates, String>>,
}

impl<'a> HitDates<'a> {
    pub(super) fn new(inner: &'a Inner) -> HitDates<'a> {
        HitDates { inner, files: HashMap::new() }
    }

    /// The day `hit` is of (Unix ms of its midnight), `None` when it is undated; `Err` with the reason when its
    /// file cannot be read (said once per file by the caller).
    pub(super) fn day(&mut self, hit: &SearchResult) -> Result<Option<i64>, String> {
        let inner = self.inner;
        let dates = self.files.entry((hit.source, hit.path.clone())).or_insert_with(|| read(inner, hit.source, &hit.path));
        match dates {
            Ok(FileDates::Note(d)) => Ok(d.at(hit.start_line)),
            // The first message at or after the hit's first line: the chunk's first message, as the indexed
            // engines date a transcript's chunk.
            Ok(FileDates::Transcript(days)) => Ok(days.iter().find(|(line, _)| *line >= hit.start_line).and_then(|(_, d)| *d)),
            Err(why) => Err(why.clone()),
        }
    }
}

fn read(inner: &Inner, source: Source, key: &str) -> Result<FileDates, String> {
    match source {
        Source::Memory => {
            let text = read_text(&inner.roots.abs_path(key), inner.max_file_bytes).map_err(|e| e.to_string())?;
            Ok(FileDates::Note(NoteDates::of(key, &text)))
        }
        Source::Sessions => {
            let Some(s) = &inner.sessions else { return Err("session transcripts are not exported".into()) };
            let name = key.strip_prefix(memory_core::sessions::KEY_PREFIX).unwrap_or(key);
            let text = read_text(&s.src.join(name), inner.max_file_bytes).map_err(|e| e.to_string())?;
            let flat = memory_core::sessions::flatten(&text, 1);
            Ok(FileDates::Transcript(flat.jsonl_lines.into_iter().zip(flat.days).collect()))
        }
    }
}
