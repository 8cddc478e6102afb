//! What an engine that stores chunks provides. The shared [`crate::indexed::IndexedBackend`] does discovery,
//! incremental sync, embedding and ranking on top of it, so every such engine ranks alike.
//!
//! A store is storage plus candidate retrieval: it never ranks beyond its own keyword/vector scores.
#![deny(missing_docs)]

use std::collections::HashMap;
use std::sync::Arc;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::discovery::StatId;
use crate::error::Result;
use crate::identity::IndexIdentity;
use crate::sessions::SessionState;
use crate::types::Source;

/// One indexed file as the store remembers it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FileRecord {
    /// A memory file or a transcript.
    pub source: Source,
    /// Index key: workspace-relative with `/` separators, or absolute for extra paths outside the workspace.
    pub path: String,
    /// The record's [`FileState`] as one string (stores keep it in one column; read it with
    /// [`state`](Self::state), write it with [`FileState::to_stored`]).
    pub hash: String,
    /// The file's size in bytes when it was read.
    pub size: u64,
    /// Its modification time then, Unix milliseconds.
    pub mtime_ms: i64,
}

impl FileRecord {
    /// What the record says about the file's content.
    pub fn state(&self) -> FileState<'_> {
        FileState::parse(&self.hash)
    }
}

/// What a [`FileRecord`] says about its file's content.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FileState<'a> {
    /// Chunks written, some without their vectors (batch jobs still running, embedding failed): the next sync
    /// reads the file again. Stored as the empty string.
    Pending,
    /// Not indexed: binary, not UTF-8 or too large (`why` says which; empty in records written before it was
    /// kept). Stored as `!skipped:<why>` (`!skipped` alone in those older records).
    Skipped {
        /// Why, in the words the sync's warning used.
        why: &'a str,
    },
    /// Not indexed because it could not be read (`why`: "permission denied"...). Never trusted by size and mtime
    /// (a `chmod` moves neither): every sync reads it again, every freshness check tries it. Stored as
    /// `!unreadable:<why>`.
    Unreadable {
        /// Why, in a few words.
        why: &'a str,
    },
    /// Indexed content with this sha256 (hex). Not `settled` when it was read so soon after the file's mtime
    /// that a same-size rewrite in the same file-time tick could hide behind it: then its content is checked
    /// again before the record is trusted. `stat`: the file's inode and ctime when it was read (`None` in records
    /// written before they were kept: such a record is checked by its content once). Stored as the hash,
    /// prefixed with `~` when not settled, followed by `@<ctime ns>/<inode>`.
    Indexed {
        /// The content's sha256, hex.
        hash: &'a str,
        /// Read long enough after its mtime to be trusted by size and mtime.
        settled: bool,
        /// The file's inode and ctime when it was read.
        stat: Option<StatId>,
    },
    /// A transcript indexed this far. Stored as `session:v1:...` ([`SessionState::encode`]).
    Session(SessionState),
}

const SKIPPED: &str = "!skipped";
const UNREADABLE: &str = "!unreadable:";
const UNSETTLED: char = '~';
const STAT: char = '@';

impl<'a> FileState<'a> {
    /// Anything that is not one of the other forms is a content hash (so a record a store cannot make sense of
    /// matches no content and its file is read again).
    pub fn parse(stored: &'a str) -> FileState<'a> {
        if stored.is_empty() {
            FileState::Pending
        } else if stored == SKIPPED {
            FileState::Skipped { why: "" }
        } else if let Some(why) = stored.strip_prefix(SKIPPED).and_then(|rest| rest.strip_prefix(':')) {
            FileState::Skipped { why }
        } else if let Some(why) = stored.strip_prefix(UNREADABLE) {
            FileState::Unreadable { why }
        } else if let Some(st) = stored.starts_with(SessionState::PREFIX).then(|| SessionState::decode(stored)).flatten() {
            FileState::Session(st)
        } else {
            let (hash, settled) = match stored.strip_prefix(UNSETTLED) {
                Some(hash) => (hash, false),
                None => (stored, true),
            };
            match hash.rsplit_once(STAT) {
                Some((hash, stat)) => FileState::Indexed { hash, settled, stat: StatId::decode(stat) },
                None => FileState::Indexed { hash, settled, stat: None },
            }
        }
    }

    /// The one string a store keeps ([`FileRecord::hash`]).
    pub fn to_stored(&self) -> String {
        match self {
            FileState::Pending => String::new(),
            FileState::Skipped { why: "" } => SKIPPED.to_string(),
            FileState::Skipped { why } => format!("{SKIPPED}:{why}"),
            FileState::Unreadable { why } => format!("{UNREADABLE}{why}"),
            FileState::Indexed { hash, settled, stat } => {
                let mut out = String::with_capacity(hash.len() + 32);
                if !settled {
                    out.push(UNSETTLED);
                }
                out.push_str(hash);
                if let Some(stat) = stat {
                    out.push(STAT);
                    out.push_str(&stat.encode());
                }
                out
            }
            FileState::Session(st) => st.encode(),
        }
    }

    /// Indexed content read too soon after its mtime to be trusted by size and mtime alone.
    pub fn is_unsettled(&self) -> bool {
        matches!(self, FileState::Indexed { settled: false, .. })
    }

    /// Whether `stat` is the one recorded; `None` when none was recorded (an older record).
    pub fn same_stat(&self, stat: StatId) -> Option<bool> {
        match self {
            FileState::Indexed { stat: Some(s), .. } => Some(*s == stat),
            _ => None,
        }
    }

    /// The content hash of indexed content.
    pub fn content_hash(&self) -> Option<&'a str> {
        match self {
            FileState::Indexed { hash, .. } => Some(hash),
            _ => None,
        }
    }
}

/// One chunk ready to store.
#[derive(Debug, Clone, PartialEq)]
pub struct ChunkRecord {
    /// Stable id ([`crate::chunking::chunk_id`]: source, path, lines, content and embedding model).
    pub id: String,
    /// A memory file or a transcript.
    pub source: Source,
    /// Its file's index key ([`FileRecord::path`]).
    pub path: String,
    /// Its first line (1-based; a transcript's JSONL line).
    pub start_line: usize,
    /// Its last line.
    pub end_line: usize,
    /// Its text (a transcript's flattened messages).
    pub text: String,
    /// sha256 of `text`, hex.
    pub hash: String,
    /// The chunk's keyword terms, analysed by [`crate::analysis`] and joined by spaces. Stores index this
    /// field with a plain whitespace/unicode tokenizer so that every engine matches the same terms.
    pub terms: String,
    /// Terms of the chunk's headings: the Markdown headings of the section it sits in and its own heading lines
    /// ([`crate::analysis::heading_terms`]), indexed as a separate, heavier field.
    pub heading_terms: String,
    /// 1..=10 from an `<!-- importance: N -->` annotation.
    pub importance: Option<u8>,
    /// The day the chunk is of ([`crate::chunking::dates`]), as midnight UTC in Unix milliseconds: what a search
    /// within dates ([`Scope::days`]) filters by. `None`: undated.
    pub date: Option<i64>,
    /// Its vector, normalised; `None` while it waits for one (keyword search finds it meanwhile).
    pub embedding: Option<Vec<f32>>,
}

/// (basename, stem) of an index path: what [`ChunkStore::files_named`] compares a query with besides the path.
pub fn name_and_stem(path: &str) -> (&str, &str) {
    let name = path.rsplit('/').next().unwrap_or(path);
    let stem = name.rsplit_once('.').map(|(s, _)| s).unwrap_or(name);
    (name, stem)
}

/// True when `query` is the path, its basename or its stem (plain equality). An empty query names no file (a
/// dot file's stem is empty).
pub fn is_named(query: &str, path: &str) -> bool {
    let (name, stem) = name_and_stem(path);
    !query.is_empty() && (query == path || query == name || query == stem)
}

/// A keyword query: analysed terms, any of which may match (OR). Stores must quote each term as a literal;
/// user text never reaches query syntax.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeywordQuery {
    /// Analysed terms ([`crate::analysis::query_terms`]), as the chunks' `terms` hold them.
    pub terms: Vec<String>,
}

pub use memory_contract::dates::DayRange;

/// Which chunks a search may return: those of `sources` (all when empty) and, with `days`, only those dated
/// inside it (undated chunks excluded). A store applies both before it counts its `limit`, so a narrow scope
/// still fills it when the index holds that many matching chunks.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Scope {
    /// The sources searched; empty: all.
    pub sources: Vec<Source>,
    /// Only chunks dated inside (`after`/`before`, or the time a question names); `None`: any, dated or not.
    pub days: Option<DayRange>,
}

impl Scope {
    /// Every chunk of these sources (all when empty).
    pub fn sources(sources: &[Source]) -> Scope {
        Scope { sources: sources.to_vec(), days: None }
    }

    /// Whether a chunk of `source` dated `date` is inside.
    pub fn admits(&self, source: Source, date: Option<i64>) -> bool {
        (self.sources.is_empty() || self.sources.contains(&source)) && self.days.is_none_or(|d| date.is_some_and(|x| d.contains(x)))
    }
}

/// A candidate chunk returned by a store.
#[derive(Debug, Clone, PartialEq)]
pub struct Candidate {
    /// The chunk's id ([`ChunkRecord::id`]).
    pub chunk_id: String,
    /// A memory file or a transcript.
    pub source: Source,
    /// Its file's index key.
    pub path: String,
    /// Its first line.
    pub start_line: usize,
    /// Its last line.
    pub end_line: usize,
    /// Its text.
    pub text: String,
    /// Its `<!-- importance: N -->`, 1..=10.
    pub importance: Option<u8>,
    /// The day the chunk is of ([`ChunkRecord::date`]).
    pub date: Option<i64>,
    /// Modification time of the file, for temporal decay of undated sources.
    pub file_mtime_ms: i64,
    /// Keyword relevance as the store's engine scored the match: **higher is better**, positive for a match (a
    /// BM25 score as BM25 is defined). This is the one place the direction is stated; each store converts its
    /// engine's own number to it (SQLite's FTS5 `bm25()` is negative, more negative = better, so the SQLite
    /// store negates it; LanceDB's `_score` already points this way), and ranking reads only this.
    /// `None` for candidates no keyword search returned. Checked by `conformance::store_contract`.
    pub keyword_score: Option<f64>,
    /// Cosine similarity, -1..1.
    pub vector_score: Option<f64>,
}

/// Changes applied atomically: after a crash either all of a batch is visible or none of it.
#[derive(Debug, Default)]
pub struct SyncBatch {
    /// Files whose chunks are replaced by these.
    pub upserts: Vec<(FileRecord, Vec<ChunkRecord>)>,
    /// Files that grew by appending (session transcripts): these chunks are added to the file's existing ones
    /// and its record updated; nothing is deleted.
    pub appends: Vec<(FileRecord, Vec<ChunkRecord>)>,
    /// Files whose content is unchanged but whose size/mtime moved.
    pub touches: Vec<FileRecord>,
    /// Files gone: their records and chunks are deleted.
    pub removals: Vec<(Source, String)>,
}

impl SyncBatch {
    /// Nothing to apply.
    pub fn is_empty(&self) -> bool {
        self.upserts.is_empty() && self.appends.is_empty() && self.touches.is_empty() && self.removals.is_empty()
    }
}

/// Key of the embedding cache: vectors are reused only for the same provider settings.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct EmbeddingCacheKey {
    /// The provider's id (`openai`, `local`...).
    pub provider: String,
    /// Its model.
    pub model: String,
    /// Everything else that changes its vectors (dimensions, prompts, the model file's digest).
    pub fingerprint: String,
}

/// Where an indexed engine ([`crate::indexed::IndexedBackend`]) keeps its files, chunks, vectors and embedding
/// cache: what a storage plugin implements (SQLite, LanceDB, the in-memory example); every store runs
/// `conformance::store_contract`.
#[async_trait]
pub trait ChunkStore: Send + Sync {
    /// Human-readable location (file path, folder or URI) for status output.
    fn location(&self) -> String;

    /// The identity the index was built with, `None` when none was ever written (a new or unfinished index).
    /// A stored identity this code cannot read is `MemoryError::CorruptIndex`, never `None`: `None` would let the
    /// next sync stamp today's settings over vectors made with unknown ones. (Checked by the conformance crate's
    /// `store_contract`, which every store runs.)
    async fn identity(&self) -> Result<Option<IndexIdentity>>;
    /// Record the identity the index is now built with (after a sync that built it).
    async fn set_identity(&self, identity: &IndexIdentity) -> Result<()>;

    /// Every indexed file.
    async fn files(&self) -> Result<Vec<FileRecord>>;

    /// The records of these files, those that exist (a freshness check of the files a change journal named).
    /// The default scans `files()`; stores with a key on (source, path) should look each up.
    async fn file_records(&self, keys: &[(Source, String)]) -> Result<Vec<FileRecord>> {
        let wanted: std::collections::HashSet<(Source, &str)> = keys.iter().map(|(s, p)| (*s, p.as_str())).collect();
        Ok(self.files().await?.into_iter().filter(|f| wanted.contains(&(f.source, f.path.as_str()))).collect())
    }

    /// Files whose path, basename or stem equals `query` ([`is_named`]), in no particular order: which of them
    /// comes first is ranking's decision (`ranking::exact_path_tier`), not the store's. The default scans
    /// `files()`; stores with an index on paths should narrow it.
    async fn files_named(&self, query: &str) -> Result<Vec<FileRecord>> {
        Ok(self.files().await?.into_iter().filter(|f| is_named(query, &f.path)).collect())
    }

    /// Apply a sync's changes atomically ([`SyncBatch`]).
    async fn apply(&self, batch: SyncBatch) -> Result<()>;

    /// Chunks of one file in line order, up to `limit` (for exact-path hits).
    async fn file_chunks(&self, source: Source, path: &str, limit: usize) -> Result<Vec<Candidate>>;

    /// Up to `limit` keyword candidates inside `scope`, best first.
    async fn keyword_search(&self, query: &KeywordQuery, limit: usize, scope: &Scope) -> Result<Vec<Candidate>>;

    /// Up to `limit` nearest chunks inside `scope` by cosine similarity, best first. Stores without vectors
    /// return `MemoryError::Unavailable`.
    async fn vector_search(&self, vector: &[f32], limit: usize, scope: &Scope) -> Result<Vec<Candidate>>;

    /// Stored vectors of these chunks (chunks without one are absent), for feedback on the query vector.
    /// Stores that cannot read vectors back keep the default: no vectors, and searches skip that step.
    async fn chunk_vectors(&self, _chunk_ids: &[String]) -> Result<HashMap<String, Vec<f32>>> {
        Ok(HashMap::new())
    }

    /// Cached vectors for chunk hashes (missing hashes are simply absent).
    async fn cached_embeddings(&self, key: &EmbeddingCacheKey, hashes: &[String]) -> Result<HashMap<String, Vec<f32>>>;
    /// Store vectors, pruning the oldest entries beyond `max_entries`.
    async fn cache_embeddings(&self, key: &EmbeddingCacheKey, entries: &[(String, Vec<f32>)], max_entries: usize) -> Result<()>;

    /// (files, chunks).
    async fn counts(&self) -> Result<(usize, usize)>;

    /// How many files are indexed by their words only and wait for their vectors ([`FileState::Pending`]). Asked
    /// by every search of an engine with an embedding provider: a store keeps it cheap (SQLite: a partial index
    /// over those records). The default reads every record.
    async fn files_waiting_for_vectors(&self) -> Result<usize> {
        Ok(self.files().await?.iter().filter(|f| f.state() == FileState::Pending).count())
    }

    /// Why this store was opened read-only (its files cannot be written: a read-only or full disk), `None` when
    /// it can be written. Searches answer from it as it is and say so.
    fn read_only(&self) -> Option<String> {
        None
    }

    /// Read everything once and say `CorruptIndex` if any of it is damaged (an expensive check, for
    /// `status --deep`). A part the store can rebuild from what it holds (a keyword index out of step with its
    /// chunks) is rebuilt here, and what was repaired is returned for the user. Stores that cannot check keep
    /// the default.
    async fn verify(&self) -> Result<Option<String>> {
        Ok(None)
    }

    /// Facts only this store knows (its vector index, say), shown under `extra` in the engine's status.
    async fn status_details(&self) -> Result<serde_json::Map<String, serde_json::Value>> {
        Ok(serde_json::Map::new())
    }

    /// Small key/value metadata (last sync time...).
    async fn meta(&self, key: &str) -> Result<Option<String>>;
    /// Set a metadata value.
    async fn set_meta(&self, key: &str, value: &str) -> Result<()>;

    /// Flush and release the store (a closed store answers nothing more).
    async fn close(&self) -> Result<()>;
}

/// Holds an index's writer lock ([`IndexStorage::writer_lock`]) until dropped: a file lock, a lease on an object
/// store, whatever the storage serialises its writers with.
pub struct WriterGuard {
    _held: Box<dyn Send>,
}

impl WriterGuard {
    /// A guard releasing its lock when `held` drops.
    pub fn new(held: impl Send + 'static) -> WriterGuard {
        WriterGuard { _held: Box::new(held) }
    }
}

impl From<crate::file_lock::FileLockGuard> for WriterGuard {
    fn from(g: crate::file_lock::FileLockGuard) -> WriterGuard {
        WriterGuard::new(g)
    }
}

impl std::fmt::Debug for WriterGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("WriterGuard")
    }
}

/// Where an engine keeps its index, and how it swaps in a rebuilt one. A rebuild is written to a staging
/// store beside the live one and promoted only when complete, so search answers from the old index meanwhile
/// and a crash mid-rebuild loses nothing.
#[async_trait]
pub trait IndexStorage: Send + Sync {
    /// Open (creating if needed) the live store.
    async fn open_live(&self) -> Result<Arc<dyn ChunkStore>>;
    /// A fresh, empty store beside the live one (any leftover staging store is discarded).
    async fn open_staging(&self) -> Result<Arc<dyn ChunkStore>>;
    /// A rebuild into `staging` failed (disk full, a provider error...): close it and delete what it wrote, so a
    /// failed rebuild never keeps the disk full. The default only closes it.
    async fn discard_staging(&self, staging: Arc<dyn ChunkStore>) -> Result<()> {
        staging.close().await
    }
    /// Make a completed staging store the live one. `live` is the current live handle, which the storage may
    /// close. Returns the new live handle.
    async fn promote(&self, live: Arc<dyn ChunkStore>, staging: Arc<dyn ChunkStore>) -> Result<Arc<dyn ChunkStore>>;
    /// Delete every index file (memory files are never touched).
    async fn destroy(&self) -> Result<()>;
    /// The live store is damaged (a read said [`MemoryError::CorruptIndex`](crate::MemoryError::CorruptIndex)):
    /// move it aside, so that the next `open_live` starts an empty one which the next sync fills from the files.
    /// The caller has closed its handle and holds the writer lock. `false`: this storage cannot, the error stands.
    async fn set_aside_live(&self, _why: &crate::MemoryError) -> Result<bool> {
        Ok(false)
    }
    /// Become the index's only writer across processes (others syncing the same index wait their turn);
    /// released when the guard drops. With `wait = false`, fail with `Unavailable` instead of waiting.
    /// Storages whose backend serialises writers itself return `None`.
    async fn writer_lock(&self, _wait: bool) -> Result<Option<WriterGuard>> {
        Ok(None)
    }
    /// Names the live store, for storages where another process can swap in a rebuilt one: when it changes, a
    /// long-running engine reopens the live store (else it would keep searching, and writing into, the replaced
    /// one). `None`: the live handle follows swaps itself, or there are none.
    async fn live_marker(&self) -> Result<Option<String>> {
        Ok(None)
    }
    /// Human-readable location.
    fn location(&self) -> String;
}

#[cfg(test)]
mod tests {
    use super::{is_named, name_and_stem, FileState};

    #[test]
    fn a_skipped_record_keeps_its_reason_and_older_ones_still_read_as_skipped() {
        let why = "file is 20 bytes, over the 10-byte limit";
        let stored = FileState::Skipped { why }.to_stored();
        assert_eq!(FileState::parse(&stored), FileState::Skipped { why });
        // Written before the reason was kept.
        assert_eq!(FileState::parse("!skipped"), FileState::Skipped { why: "" });
        assert_eq!(FileState::Skipped { why: "" }.to_stored(), "!skipped");
        assert_eq!(FileState::parse("!unreadable:permission denied"), FileState::Unreadable { why: "permission denied" });
    }

    #[test]
    fn a_file_is_named_by_its_path_basename_or_stem_only() {
        assert_eq!(name_and_stem("memory/notes/rust.txt.md"), ("rust.txt.md", "rust.txt"));
        assert_eq!(name_and_stem("README"), ("README", "README"));
        for q in ["memory/rust.md", "rust.md", "rust"] {
            assert!(is_named(q, "memory/rust.md"), "{q}");
        }
        for q in ["memory", "rus", "md", "memory/rust", " rust"] {
            assert!(!is_named(q, "memory/rust.md"), "{q}");
        }
        // A dot file's stem is empty, and an empty query names nothing.
        assert_eq!(name_and_stem("memory/.hidden").1, "");
        assert!(!is_named("", "memory/.hidden"));
    }
}
