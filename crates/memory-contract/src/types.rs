//! The shapes of the two agent tools and of status/sync reports. Field names are the wire names.
#![deny(missing_docs)]

use serde::{Deserialize, Serialize};

/// Where a memory came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[cfg_attr(feature = "json-schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "lowercase")]
pub enum Source {
    /// The Markdown memory files.
    Memory,
    /// Indexed conversation transcripts.
    Sessions,
}

impl Source {
    /// Every source, in a fixed order.
    pub const ALL: [Source; 2] = [Source::Memory, Source::Sessions];

    /// Its wire name (`memory`, `sessions`).
    pub fn as_str(self) -> &'static str {
        match self {
            Source::Memory => "memory",
            Source::Sessions => "sessions",
        }
    }

    /// The source of a wire name; `None` for any other text.
    pub fn parse(s: &str) -> Option<Source> {
        match s {
            "memory" => Some(Source::Memory),
            "sessions" => Some(Source::Sessions),
            _ => None,
        }
    }
}

/// `memory_search`: what every wire carries for a search (the MCP tool's arguments and their schema, the CLI's
/// job for a shared server, the conformance fixtures), in OpenClaw's names. Its field docs are what an agent reads
/// in the tool's schema.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "json-schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SearchRequest {
    /// What to look for, in natural language or keywords.
    pub query: String,
    /// At most this many snippets (default 6).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_results: Option<usize>,
    /// Drop snippets scoring below this, 0..1 (default 0.35; keyword hits are returned when none pass).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_score: Option<f64>,
    /// Search only these: "memory" (the Markdown memory files), "sessions" (indexed conversation transcripts).
    /// Default: every source the memory is configured to index.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sources: Vec<Source>,
    /// The session's active repository keys (e.g. `github.com/org/repo`), most recent first, at most 4 read:
    /// entries tagged `<!-- project: key -->` of an active repository rank higher, another's lower.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub active_project_keys: Vec<String>,
    /// Only notes dated on or after this day, `YYYY-MM-DD` (inclusive): daily logs by the date in their name,
    /// other notes by their front matter `date:` or a dated heading (`## 2026-03-04`) above the lines. Undated
    /// notes are left out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after: Option<String>,
    /// Only notes dated on or before this day, `YYYY-MM-DD` (inclusive); undated notes are left out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub before: Option<String>,
    /// For debugging a ranking, not for answering: also return `explanation`, every factor that placed each of
    /// the first hits (keyword and vector scores, leg weights, recency, time, importance, project, reranker, the
    /// minScore cut, the snippet's lines).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub explain: bool,
    /// With `explain`: also say where this memory file is in the search and why (not a memory file, skipped,
    /// not indexed, its rank, cut by minScore).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub explain_path: Option<String>,
}

impl SearchRequest {
    /// A search for `query` with every other field at its default.
    pub fn new(query: impl Into<String>) -> Self {
        SearchRequest { query: query.into(), ..Default::default() }
    }

    /// It asks for an explanation (`explain`, or `explainPath` alone).
    pub fn explains(&self) -> bool {
        self.explain || self.explain_path.is_some()
    }

    /// The days `after` and `before` hold the search to, `None` when neither is given. A value that is not a
    /// `YYYY-MM-DD` day, or `before` earlier than `after`, is an argument error naming the field.
    pub fn days(&self) -> crate::Result<Option<crate::dates::DayRange>> {
        let day = |field: &str, value: &Option<String>| -> crate::Result<Option<i64>> {
            let Some(v) = value.as_deref() else { return Ok(None) };
            let d = crate::dates::parse_day(v.trim())
                .ok_or_else(|| crate::MemoryError::InvalidInput(format!("{field}: `{v}` is not a day (YYYY-MM-DD, e.g. 2026-03-04)")))?;
            Ok(Some(d))
        };
        let (after, before) = (day("after", &self.after)?, day("before", &self.before)?);
        if let (Some(a), Some(b)) = (after, before) {
            if b < a {
                return Err(crate::MemoryError::InvalidInput(format!(
                    "before ({}) is earlier than after ({}): no day is in both",
                    self.before.as_deref().unwrap_or_default(),
                    self.after.as_deref().unwrap_or_default()
                )));
            }
        }
        if after.is_none() && before.is_none() {
            return Ok(None);
        }
        Ok(Some(crate::dates::DayRange { first: after.unwrap_or(i64::MIN), last: before.unwrap_or(i64::MAX) }))
    }
}

/// `memory_recall`, trigger recall (OpenClaw's lane-1 "trigger injection"): the entries of the curated files
/// (`MEMORY.md`, `memory.md`, `USER.md`) whose `<!-- trigger: ... -->` phrases match an inbound message strongly
/// enough to be injected as hidden context before the reply.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "json-schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RecallRequest {
    /// The inbound message (may be empty with projectEntries).
    #[serde(default)]
    pub message: String,
    /// The session's active repository keys, most recent first (at most 4 read): a project-tagged entry is
    /// eligible only while every one of its keys is active.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub active_project_keys: Vec<String>,
    /// Also list up to this many entries of MEMORY.md tagged for the active repositories (Project Memory), most
    /// important first (at most 512).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub project_entries: Option<usize>,
}

/// The most project entries one recall lists.
pub const MAX_PROJECT_ENTRIES: usize = 512;

/// An entry of `MEMORY.md` whose project keys are all active.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProjectEntry {
    /// The curated file it is in (`MEMORY.md`).
    pub path: String,
    /// Its line (1-based).
    pub line: usize,
    /// The line without its annotations.
    pub text: String,
    /// Its project keys (`<!-- project: key -->`), every one active.
    pub projects: Vec<String>,
    /// Its `<!-- importance: N -->`, 1..=10.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub importance: Option<u8>,
    /// `path#L<line>`.
    pub citation: String,
}

/// One entry to inject.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RecallEntry {
    /// The curated file it is in (`MEMORY.md` or `USER.md`).
    pub path: String,
    /// The entry's line (1-based).
    pub line: usize,
    /// The line without its annotations.
    pub text: String,
    /// 0.8 x trigger score + 0.2 x relevance; at least [`RecallResponse::threshold`].
    pub score: f64,
    /// How well the best trigger phrase matches the message (0..1).
    pub trigger_score: f64,
    /// The search score of the entry's hit for the message (keyword and vector paths), 0..1; 0 when not a hit.
    pub relevance: f64,
    /// The phrase that matched best.
    pub trigger: String,
    /// Its project keys, every one active (an entry with an inactive key is not eligible).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub projects: Vec<String>,
    /// Its `<!-- importance: N -->`, 1..=10.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub importance: Option<u8>,
    /// `path#L<line>`.
    pub citation: String,
}

/// `memory_recall`'s answer: the entries to inject before a reply.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RecallResponse {
    /// Best first, at most 3.
    pub entries: Vec<RecallEntry>,
    /// The score an entry needs (0.72).
    pub threshold: f64,
    /// Trigger-annotated entries that were eligible (curated file, projects active) and scored.
    pub candidates: usize,
    /// The search mode of the relevance leg (`hybrid`, `keyword`, `vector`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
    /// What did not work as configured (a provider down, a part missing), for the caller to show.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    /// With `project_entries` asked for: `MEMORY.md`'s entries of the active repositories.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub project_entries: Vec<ProjectEntry>,
}

/// One ranked snippet.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SearchResult {
    /// The file: workspace-relative with `/` (`memory/2026-03-04.md`), absolute for an extra path outside the
    /// workspace, `sessions/<name>.jsonl` for a transcript.
    pub path: String,
    /// The hit's first line (1-based; a transcript's JSONL line).
    pub start_line: usize,
    /// The hit's last line.
    pub end_line: usize,
    /// How well it answers: the merged score (0..1, the scale `minScore` is set in) with what the preferences added
    /// (a time the question names can lift a note of that time above 1).
    pub score: f64,
    /// The lines that answer, at most 700 characters (with a `Source:` line when citations are on).
    pub snippet: String,
    /// Memory files or transcripts.
    pub source: Source,
    /// The vector leg's cosine similarity, when the vector leg brought it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vector_score: Option<f64>,
    /// The keyword leg's score on the merge's 0..1 scale, when the keyword leg brought it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text_score: Option<f64>,
    /// `path#L<start>-L<end>`, unless citations are off.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub citation: Option<String>,
    /// The lines of the file the snippet shows (within `startLine..=endLine`): the snippet is the best window
    /// of the hit, so an agent cites or `memory_get`s exactly what it read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snippet_start_line: Option<usize>,
    /// The last line of the file the snippet shows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snippet_end_line: Option<usize>,
}

impl SearchResult {
    /// A hit with what every engine knows of one: where it is, how well it scored and what it shows. The
    /// per-signal scores, the citation and the snippet's own lines are left out, for an engine that knows them
    /// to set.
    pub fn new(source: Source, path: impl Into<String>, start_line: usize, end_line: usize, score: f64, snippet: impl Into<String>) -> SearchResult {
        SearchResult {
            path: path.into(),
            start_line,
            end_line,
            score,
            snippet: snippet.into(),
            source,
            vector_score: None,
            text_score: None,
            citation: None,
            snippet_start_line: None,
            snippet_end_line: None,
        }
    }
}

/// `memory_search`'s answer.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SearchResponse {
    /// Best first, at most `maxResults`.
    pub results: Vec<SearchResult>,
    /// How the answer was produced: "hybrid", "keyword", "vector".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
    /// Set when an engine answered in place of the configured one, or a part was missing.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    /// Why it answered what it did, when the request asked (`explain`) and the engine can say.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub explanation: Option<Box<crate::explanation::Explanation>>,
}

/// `memory_get`: a safe read of a memory file or some of its lines, on every wire.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "json-schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GetRequest {
    /// Workspace-relative path of a memory file, e.g. `MEMORY.md` or `memory/2026-11-30.md` (as returned by memory_search).
    pub path: String,
    /// First line to read, 1-based (default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<usize>,
    /// Number of lines to read (default: up to 120 lines / 12,000 characters).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lines: Option<usize>,
    /// Characters of the first line to skip, to read the rest of a line longer than 12,000 characters (an
    /// answer cut inside a line says `truncated` and gives this as `nextOffset`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offset: Option<usize>,
}

/// `memory_get`'s answer.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GetResponse {
    /// Workspace-relative path (or the configured extra path) that was read.
    pub path: String,
    /// The lines read, as written (line ends `\n`).
    pub text: String,
    /// 1-based first line returned (0 when the text is empty).
    pub from: usize,
    /// Number of lines returned.
    pub lines: usize,
    /// Lines in the whole file.
    pub total_lines: usize,
    /// True when the file does not exist yet (a daily log before its first write).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub missing: bool,
    /// True when more text follows; `note` says how to continue.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub truncated: bool,
    /// For the reader: how to read on, or why the text is short.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// When the first line was cut at the character limit: the `offset` that reads on (with the same `from`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_offset: Option<usize>,
}

/// What an engine can do. Conformance cases are gated on these.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Capabilities {
    /// Search by words.
    pub keyword: bool,
    /// Search by meaning (an embedding provider is configured and answers).
    pub vector: bool,
    /// Both at once, merged.
    pub hybrid: bool,
    /// The index survives a restart.
    pub persistent: bool,
    /// The engine applies the shared ranking pipeline (decay, importance, MMR, exact-path tiers).
    pub shared_ranking: bool,
    /// Keyword search understands CJK text.
    pub cjk: bool,
    /// Sessions transcripts can be indexed.
    pub sessions: bool,
    /// A search asked to (`SearchRequest::explain`) returns every factor that placed its hits
    /// (`SearchResponse::explanation`).
    #[serde(default)]
    pub explain: bool,
}

/// Progress callback for long syncs.
pub type ProgressFn = std::sync::Arc<dyn Fn(SyncProgress) + Send + Sync>;

/// How far a sync is: files prepared out of those to process, chunks embedded so far.
#[derive(Debug, Clone, Copy)]
pub struct SyncProgress {
    /// Files read and chunked so far.
    pub files_done: usize,
    /// Files this sync processes.
    pub files_total: usize,
    /// Chunks embedded so far.
    pub chunks_embedded: usize,
}

/// How a sync runs.
#[derive(Debug, Clone, Copy, Default)]
pub struct SyncOptions {
    /// Rebuild everything, ignoring what is already indexed.
    pub force: bool,
    /// How long the sync waits for the embedding provider (`EMBED_WAIT`, `CALL_WAIT`; the engine's patience beyond them: `indexed::patience`).
    pub embed_wait: EmbedWait,
}

/// The longest a search or an append waits for the embedding provider (its sync's vectors and the query's).
pub const EMBED_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// The longest one provider call of a background sync beside searches may take: a healthy provider answers a
/// request (at most ~8,000 tokens) in seconds, a local model a batch in a few.
pub const CALL_WAIT: std::time::Duration = std::time::Duration::from_secs(30);

/// How long a sync waits for the embedding provider. What a bounded sync does not get embedded in time is indexed
/// by its words and waits for a later sync; both bounded kinds do not wait at all while the provider is paused
/// after a slow failure (`indexed::patience`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum EmbedWait {
    /// As long as the provider takes, its own timeouts and retries included: `memory index`, watched by someone who
    /// sees its progress, with nothing else waiting on the index.
    #[default]
    AsLongAsItTakes,
    /// Someone waits for the sync (an agent's append, a search's sync): at most this long in all.
    AtMost(std::time::Duration),
    /// Searches share the index meanwhile (the watcher's syncs in `memory serve`): each call to the provider at most
    /// this long, so that a backfill goes at the provider's pace and a provider that stopped answering holds the
    /// index for one such wait, not for its timeouts times its retries.
    EachCallAtMost(std::time::Duration),
}

impl SyncOptions {
    /// A sync an agent waits for (an append): [`EMBED_WAIT`] in all for the provider.
    pub fn agent_call() -> SyncOptions {
        SyncOptions { embed_wait: EmbedWait::AtMost(EMBED_WAIT), ..SyncOptions::default() }
    }

    /// A background sync beside searches (the watcher's): [`CALL_WAIT`] a provider call.
    pub fn beside_searches() -> SyncOptions {
        SyncOptions { embed_wait: EmbedWait::EachCallAtMost(CALL_WAIT), ..SyncOptions::default() }
    }
}

/// What a sync did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SyncReport {
    /// Memory files (and transcripts) discovery found.
    pub files_scanned: usize,
    /// Files indexed for the first time.
    pub files_added: usize,
    /// Files whose content changed and was indexed again.
    pub files_changed: usize,
    /// Files gone from the workspace, and from the index now.
    pub files_removed: usize,
    /// Files whose content did not change.
    pub files_unchanged: usize,
    /// Files left out (too large, binary, not UTF-8, unreadable: `Status::skipped` says which).
    pub files_skipped: usize,
    /// Chunks written to the index.
    pub chunks_written: usize,
    /// Chunks the embedding provider embedded.
    pub chunks_embedded: usize,
    /// Chunks whose vectors came from the embedding cache (the same text embedded before).
    pub embeddings_cached: usize,
    /// True when the whole index was rebuilt (forced, or its identity changed).
    pub rebuilt: bool,
    /// Files this sync indexed by their words only, waiting for embeddings (the embedding failed, or a provider
    /// batch job is still running): keyword search finds them, and a later sync embeds them.
    #[serde(default)]
    pub files_pending: usize,
    /// What did not go as it should (a file skipped, embeddings that failed), for the caller to show.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

impl SyncReport {
    /// Take in a second pass over the files this sync indexed by their words first: its embeddings and warnings
    /// add up, and its files still waiting are the ones that wait.
    pub fn add_vectors_pass(&mut self, vectors: SyncReport) {
        self.chunks_embedded += vectors.chunks_embedded;
        self.embeddings_cached += vectors.embeddings_cached;
        self.files_pending = vectors.files_pending;
        self.warnings.extend(vectors.warnings);
    }

    /// The index now holds other content than before the sync.
    pub fn changed_anything(&self) -> bool {
        self.files_added + self.files_changed + self.files_removed > 0 || self.rebuilt
    }
}

/// Status of an engine. Engines fill what applies; `extra` carries engine-specific details.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Status {
    /// The engine answering (`builtin`, `qmd`, `lancedb`, a plugin's name).
    pub backend: String,
    /// The workspace it indexes.
    pub workspace: String,
    /// Where its index is (a file or a folder; an `s3://` URL).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub index_path: Option<String>,
    /// Files indexed.
    pub files: usize,
    /// Chunks indexed.
    pub chunks: usize,
    /// What it can do now.
    pub capabilities: Capabilities,
    /// The embedding provider, when one is configured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
    /// The embedding model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The width of its vectors.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dimensions: Option<usize>,
    /// Unix milliseconds of the last completed sync.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_sync_ms: Option<i64>,
    /// True when files changed since the last sync (as far as the engine knows).
    pub dirty: bool,
    /// True when the index was built with other settings than the configuration now asks for (model, chunking,
    /// sources...): the next sync rebuilds it beside the live one, which answers meanwhile.
    #[serde(default)]
    pub rebuild_pending: bool,
    /// Set while another engine answers for this one, and why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fallback: Option<FallbackStatus>,
    /// What is not as it should be (files waiting for embeddings, a read-only index, config keys not used).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    /// Files found but not indexed, each with why.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub skipped: Vec<SkippedFile>,
    /// The engine's own details (`staleFiles`, `tokenizer`, ...).
    #[serde(default, skip_serializing_if = "serde_json::Map::is_empty")]
    pub extra: serde_json::Map<String, serde_json::Value>,
}

/// A file discovery found that the index does not hold.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SkippedFile {
    /// Index key, as search results cite it.
    pub path: String,
    /// Why: too large, binary, not UTF-8, unreadable (the words the sync's warning used).
    pub reason: String,
    /// Tried again on every sync (a file that could not be read may be readable later); the others wait for
    /// their file to change.
    pub retried: bool,
}

/// Another engine answering for the configured one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FallbackStatus {
    /// The configured engine that cannot answer.
    pub from: String,
    /// Why it cannot.
    pub reason: String,
    /// Unix milliseconds since when the fallback has been answering.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<i64>,
}
