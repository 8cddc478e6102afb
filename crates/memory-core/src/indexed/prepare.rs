//! Preparing one changed-looking file for the index: read it, decide whether it changed, chunk it (Markdown
//! notes, media, session transcripts).

use super::*;

/// The record of `f` as it is on disk now, in `state`.
fn record_of(f: &MemoryFile, state: FileState<'_>) -> FileRecord {
    FileRecord { source: f.source, path: f.key.clone(), hash: state.to_stored(), size: f.size, mtime_ms: f.mtime_ms }
}

/// What one file needs in the index.
pub(super) enum Prepared {
    Skipped {
        record: FileRecord,
        warning: String,
    },
    /// Same content, new size/mtime.
    Touched(FileRecord),
    Changed {
        record: FileRecord,
        chunks: Vec<ChunkRecord>,
        existed: bool,
    },
    /// A transcript's new tail.
    Appended {
        record: FileRecord,
        chunks: Vec<ChunkRecord>,
    },
    /// A transcript that grew less than the re-index thresholds: left for a later sync.
    Deferred,
    /// Deleted between discovery and its read: removed from the index, as the next discovery would (not
    /// "skipped", which would say something is wrong with the file).
    Vanished(Source, String),
}

/// Pieces of one long line with the same text (a repeated pattern, a pasted blob) have the same lines and hash,
/// so the same id: number the repeats (the first keeps its id, so ids of ordinary files do not change).
pub(super) fn unique_chunk_ids(chunks: &mut [ChunkRecord], model: &str) {
    let mut seen: HashMap<String, usize> = HashMap::new();
    for c in chunks.iter_mut() {
        let n = seen.entry(c.id.clone()).or_insert(0);
        *n += 1;
        if *n > 1 {
            c.id = chunk_id(c.source.as_str(), &c.path, c.start_line, c.end_line, &format!("{}#{n}", c.hash), model);
        }
    }
}

/// `f` is left out of the index (`what` says which kind of file): logged, recorded as skipped, and said once in
/// the sync's warnings.
fn skipped(f: &MemoryFile, what: &str, why: impl std::fmt::Display) -> Prepared {
    if std::fs::symlink_metadata(&f.abs_path).is_err_and(|e| e.kind() == std::io::ErrorKind::NotFound) {
        debug!(path = %f.abs_path.display(), "deleted while indexing");
        return Prepared::Vanished(f.source, f.key.clone());
    }
    warn!(path = %f.abs_path.display(), reason = %why, "{what} skipped");
    let why = why.to_string();
    Prepared::Skipped { record: record_of(f, FileState::Skipped { why: &why }), warning: format!("{}: skipped: {why}", f.key) }
}

/// `f` could not be read: left out like a skipped file, but recorded as unreadable so that it is tried again.
fn unreadable(f: &MemoryFile, what: &str, e: &std::io::Error) -> Prepared {
    let why = crate::discovery::unreadable_why(e);
    unreadable_because(f, what, &why)
}

fn unreadable_because(f: &MemoryFile, what: &str, why: &str) -> Prepared {
    warn!(path = %f.abs_path.display(), reason = %why, "{what} unreadable; tried again on the next sync");
    Prepared::Skipped { record: record_of(f, FileState::Unreadable { why }), warning: format!("{}: skipped: unreadable ({why})", f.key) }
}

impl IndexedBackend {
    /// Read one new or changed-looking file and decide what the index needs.
    pub(super) fn prepare(&self, f: &MemoryFile, old: Option<&FileRecord>) -> Prepared {
        if f.source == Source::Sessions {
            return self.prepare_session(f, old);
        }
        if self.roots().media {
            if let Some(mime) = media_mime(&f.abs_path) {
                return self.prepare_media(f, old, mime);
            }
        }
        let text = match read_text(&f.abs_path, self.config.memory.search.max_file_bytes) {
            Ok(t) => t,
            Err(crate::discovery::SkipReason::Unreadable(why)) => return unreadable_because(f, "memory file", &why),
            Err(why) => return skipped(f, "memory file", why),
        };
        let hash = crate::sha256_hex(text.as_bytes());
        let record = record_of(f, indexed_state(&hash, f, crate::now_ms()));
        if old.is_some_and(|o| o.state().content_hash() == Some(hash.as_str())) {
            return Prepared::Touched(record);
        }
        Prepared::Changed { chunks: self.make_chunks(f, &text), record, existed: old.is_some() }
    }

    /// An image or audio file (multimodal memory): one chunk whose text is the file's path (the snippet; the
    /// keyword leg sees the words of its name) and whose vector is the file's own embedding.
    pub(super) fn prepare_media(&self, f: &MemoryFile, old: Option<&FileRecord>, mime: &str) -> Prepared {
        let limit = self.config.memory.search.multimodal.max_file_bytes;
        let skipped = |why: String| skipped(f, "media file", why);
        if f.size > limit {
            return skipped(format!("file is {} bytes, over the {limit}-byte limit (multimodal.maxFileBytes)", f.size));
        }
        let bytes = match std::fs::read(&f.abs_path) {
            Ok(b) if b.len() as u64 > limit => {
                return skipped(format!("file is {} bytes, over the {limit}-byte limit (multimodal.maxFileBytes)", b.len()))
            }
            Ok(b) => b,
            Err(e) => return unreadable(f, "media file", &e),
        };
        let hash = crate::sha256_hex(&bytes);
        let record = record_of(f, indexed_state(&hash, f, crate::now_ms()));
        if old.is_some_and(|o| o.state().content_hash() == Some(hash.as_str())) {
            return Prepared::Touched(record);
        }
        // Distinct from any text chunk's hash: the cache holds the media embedding under it.
        let chunk_hash = crate::sha256_hex(format!("media\u{1f}{mime}\u{1f}{hash}").as_bytes());
        let name_words: String = f.key.chars().map(|c| if c.is_alphanumeric() { c } else { ' ' }).collect();
        let chunk = ChunkRecord {
            id: chunk_id(f.source.as_str(), &f.key, 1, 1, &chunk_hash, &self.model_name()),
            source: f.source,
            path: f.key.clone(),
            start_line: 1,
            end_line: 1,
            terms: document_terms_joined(&name_words),
            heading_terms: heading_terms(&[], ""),
            importance: None,
            date: crate::discovery::date_from_path(&f.key),
            hash: chunk_hash,
            text: f.key.clone(),
            embedding: None,
        };
        Prepared::Changed { chunks: vec![chunk], record, existed: old.is_some() }
    }

    /// Whether a chunk stands for an image or audio file (embedded from the file, not from its text).
    pub(super) fn is_media_chunk(&self, c: &ChunkRecord) -> bool {
        self.roots().media && c.source == Source::Memory && media_mime(std::path::Path::new(&c.path)).is_some()
    }

    /// A transcript: read only the tail past what was indexed, once it has grown enough; re-read a truncated or
    /// rotated file whole.
    pub(super) fn prepare_session(&self, f: &MemoryFile, old: Option<&FileRecord>) -> Prepared {
        use std::io::{Read, Seek, SeekFrom};
        let skipped = |why: String| skipped(f, "transcript", why);
        let mut file = match std::fs::File::open(&f.abs_path) {
            Ok(file) => file,
            Err(e) => return unreadable(f, "transcript", &e),
        };
        let prefix_hash = |file: &mut std::fs::File, len: u64| -> std::io::Result<String> {
            let mut buf = vec![0u8; len.min(sessions::PREFIX_BYTES as u64) as usize];
            file.seek(SeekFrom::Start(0))?;
            file.read_exact(&mut buf)?;
            Ok(crate::sha256_hex(&buf))
        };
        let delta = &self.config.memory.search.sync.sessions;
        if let Some(FileState::Session(st)) = old.map(FileRecord::state) {
            let grown = f.size >= st.bytes && prefix_hash(&mut file, st.bytes).is_ok_and(|h| h == st.prefix_hash);
            if grown {
                let mut tail = Vec::new();
                if let Err(e) = file.seek(SeekFrom::Start(st.bytes)).and_then(|_| file.read_to_end(&mut tail)) {
                    return skipped(e.to_string());
                }
                let complete = tail.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
                let tail_text = String::from_utf8_lossy(&tail[..complete]);
                let flat = sessions::flatten(&tail_text, st.records + 1);
                if (complete as u64) < delta.delta_bytes && (flat.lines.len() as u64) < delta.delta_messages {
                    return Prepared::Deferred;
                }
                let bytes = st.bytes + complete as u64;
                let state = SessionState {
                    bytes,
                    records: st.records + flat.records,
                    messages: st.messages + flat.lines.len(),
                    prefix_hash: match prefix_hash(&mut file, bytes) {
                        Ok(h) => h,
                        Err(e) => return skipped(e.to_string()),
                    },
                };
                let record = record_of(f, FileState::Session(state));
                return Prepared::Appended { chunks: self.session_chunks(f, &flat), record };
            }
            debug!(path = %f.key, "transcript truncated or rotated; re-reading it whole");
        }
        let mut all = Vec::new();
        if let Err(e) = file.seek(SeekFrom::Start(0)).and_then(|_| file.read_to_end(&mut all)) {
            return skipped(e.to_string());
        }
        let complete = all.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
        let flat = sessions::flatten(&String::from_utf8_lossy(&all[..complete]), 1);
        let state = SessionState {
            bytes: complete as u64,
            records: flat.records,
            messages: flat.lines.len(),
            prefix_hash: crate::sha256_hex(&all[..complete.min(sessions::PREFIX_BYTES)]),
        };
        let record = record_of(f, FileState::Session(state));
        Prepared::Changed { chunks: self.session_chunks(f, &flat), record, existed: old.is_some() }
    }

    /// Chunks of flattened transcript lines, with line numbers mapped back to the JSONL file.
    pub(super) fn session_chunks(&self, f: &MemoryFile, flat: &sessions::Flattened) -> Vec<ChunkRecord> {
        let mut chunks = self.make_chunks(f, &flat.text());
        for c in &mut chunks {
            // A transcript's chunk is of the day its first message was written.
            c.date = flat.days.get(c.start_line - 1).copied().flatten();
            c.start_line = flat.jsonl_lines[c.start_line - 1];
            c.end_line = flat.jsonl_lines[c.end_line - 1];
            c.id = chunk_id(f.source.as_str(), &f.key, c.start_line, c.end_line, &c.hash, &self.model_name());
            c.importance = None;
        }
        unique_chunk_ids(&mut chunks, &self.model_name());
        chunks
    }

    pub(super) fn make_chunks(&self, f: &MemoryFile, text: &str) -> Vec<ChunkRecord> {
        let c = &self.config.memory.search.chunking;
        let file_importance = importance(text);
        let model = self.model_name();
        let cut = chunk_text(text, c.tokens, c.overlap);
        let above = headings_above(text, &cut.iter().map(|ch| ch.start_line).collect::<Vec<_>>());
        let dates = crate::chunking::dates::NoteDates::of(&f.key, text);
        let mut chunks: Vec<ChunkRecord> = cut
            .into_iter()
            .zip(above)
            .map(|(ch, above)| ChunkRecord {
                id: chunk_id(f.source.as_str(), &f.key, ch.start_line, ch.end_line, &ch.hash, &model),
                source: f.source,
                path: f.key.clone(),
                start_line: ch.start_line,
                end_line: ch.end_line,
                terms: document_terms_joined(&ch.text),
                heading_terms: heading_terms(&above, &ch.text),
                importance: importance(&ch.text).or(file_importance),
                date: dates.at(ch.start_line),
                hash: ch.hash,
                text: ch.text,
                embedding: None,
            })
            .collect();
        unique_chunk_ids(&mut chunks, &model);
        chunks
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_deleted_before_its_read_is_removed_not_skipped() {
        let d = tempfile::tempdir().unwrap();
        let f = MemoryFile {
            source: Source::Memory,
            key: "memory/gone.md".into(),
            abs_path: d.path().join("memory/gone.md"),
            size: 3,
            mtime_ms: 0,
            stat: Default::default(),
        };
        let why = "cannot read file: No such file or directory";
        assert!(matches!(skipped(&f, "memory file", why), Prepared::Vanished(Source::Memory, k) if k == "memory/gone.md"));
        // A file that is there but cannot be used is still skipped, with its warning.
        std::fs::create_dir_all(d.path().join("memory")).unwrap();
        std::fs::write(&f.abs_path, [0u8, 1, 2]).unwrap();
        assert!(matches!(skipped(&f, "memory file", "file looks binary"), Prepared::Skipped { .. }));
    }
}
