//! Why a search answered what it did: the shape `memory explain` prints and `memory_search` returns with
//! `explain` (field names are the wire names). Filled by the indexed engines (`ranking::Trace`).
#![deny(missing_docs)]

use serde::{Deserialize, Serialize};

use crate::types::Source;

/// How a search read its query, how its legs answered, and every factor that placed each of its first hits.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Explanation {
    /// How the query was read.
    pub query: QueryReading,
    /// The day the search was asked on (`YYYY-MM-DD`): what "yesterday" or "last week" in the query means.
    pub today: String,
    /// Candidates each leg brought (the keyword leg after its feedback expansion, the vector leg after its
    /// refined second search), and the budget each leg was asked for.
    pub keyword_candidates: usize,
    /// See `keyword_candidates`.
    pub vector_candidates: usize,
    /// The most candidates each leg was asked for (`maxResults`, at least ten, x `candidateMultiplier`).
    pub candidate_limit: usize,
    /// The weights the merge gave the legs on this query (normalised over the legs that answered).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weights: Option<LegWeights>,
    /// The similarity the embedding model gives this query and unrelated text: vector scores count from it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vector_floor: Option<f64>,
    /// Set when the vector leg was set aside on this query: none of its candidates was more like the query than
    /// text about something else is (the embedding model does not tell this query's notes from unrelated text,
    /// as an English model reading Chinese), so the search ranked by words.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vector_set_aside: Option<VectorSetAside>,
    /// The `minScore` the cut used.
    pub min_score: f64,
    /// The most results asked for.
    pub max_results: usize,
    /// Temporal decay's half-life in days, when it is on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub half_life_days: Option<f64>,
    /// A second stage (a cross-encoder) re-scored the best candidates.
    pub reranked: bool,
    /// How many candidates were ranked in all.
    pub ranked: usize,
    /// The first hits of the ranking (at least ten, as many as the results when more were asked for), in order,
    /// the results and those just below them.
    pub hits: Vec<HitExplanation>,
    /// Where the note asked about (`explainPath`) is in this search, and why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<PathExplanation>,
}

/// A vector leg set aside: its best candidate's cosine with the query, and the query's cosine with the unrelated
/// text most like it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VectorSetAside {
    /// The cosine of the vector leg's best candidate.
    pub best: f64,
    /// The cosine of the unrelated probe text most like the query: what the best candidate did not exceed.
    pub unrelated: f64,
}

/// The query as the ranking read it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct QueryReading {
    /// The terms the keyword leg looks up.
    pub terms: Vec<String>,
    /// The time it names ("last week" -> those days), which moves notes of that time up.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub time: Vec<TimeReading>,
    /// What it names exactly (an identifier, a quoted phrase): in hybrid search, chunks holding it rank first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exact: Option<String>,
    /// It asks about the present ("now", "currently", "目前"): the newer of two notes is preferred more.
    pub asks_about_present: bool,
}

/// A time expression of the query and the days it means.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TimeReading {
    /// The words as asked ("last week").
    pub text: String,
    /// Its first day, `YYYY-MM-DD`.
    pub first: String,
    /// Its last day, `YYYY-MM-DD`.
    pub last: String,
}

/// The weights of the two legs in the merge.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LegWeights {
    /// The keyword leg's.
    pub text: f64,
    /// The vector leg's.
    pub vector: f64,
}

/// Every factor that placed one hit.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HitExplanation {
    /// Its place in the ranking, from 1, before the `minScore` cut.
    pub rank: usize,
    /// Its place among the results, from 1; `None` when it is not one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<usize>,
    /// The file, as results name it.
    pub path: String,
    /// The chunk's first line (1-based).
    pub start_line: usize,
    /// The chunk's last line.
    pub end_line: usize,
    /// Memory files or transcripts.
    pub source: Source,
    /// The day the chunk is of (`YYYY-MM-DD`: a daily log's name, front matter, a dated heading, a transcript's
    /// timestamp).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub date: Option<String>,
    /// What the keyword leg gave it; `None` when it matched no query term.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keyword: Option<KeywordFactor>,
    /// What the vector leg gave it; `None` when it was not among the vector leg's candidates.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vector: Option<VectorFactor>,
    /// The merged score: text weight x text score + vector weight x vector score.
    pub merged: f64,
    /// Its file's name is the query (1-3: how exactly); such hits rank first.
    pub exact_path_tier: u8,
    /// It holds what the query names exactly (hybrid search ranks it above those that do not).
    pub exact_match: bool,
    /// Added for being a newer dated note among near-equal ones.
    pub recency: f64,
    /// Added for being dated inside the time the query names.
    pub time_window: f64,
    /// Moved among the first five for holding the query's words in one sentence (the change of its score).
    pub sentence: f64,
    /// The age temporal decay counted, in days; `None` with decay off or for an evergreen note.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub age_days: Option<f64>,
    /// Temporal decay's factor (1 when off or for an evergreen note).
    pub decay: f64,
    /// Importance's factor (`<!-- importance: N -->`: 0.75 + 0.05 x N; 1 without).
    pub importance: f64,
    /// The project's factor (an active repository's entry 1.15, another's 0.9, untagged 1).
    pub project: f64,
    /// The change the reranker made to its score; `None` when it did not read this hit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rerank: Option<f64>,
    /// Its final score (what the result carries).
    pub score: f64,
    /// Whether the `minScore` cut kept it, and why.
    pub verdict: Verdict,
    /// The lines its snippet shows and the query's words on them; `None` when it is not a result.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snippet: Option<SnippetReason>,
}

/// The keyword leg's part.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct KeywordFactor {
    /// The store's keyword score (BM25, with feedback terms at their weight).
    pub bm25: f64,
    /// That score on the 0..1 scale the merge adds (in proportion to the best match, times the share of the
    /// question the best match holds).
    pub text_score: f64,
    /// The query's words the chunk holds.
    pub words: Vec<String>,
}

/// The vector leg's part.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VectorFactor {
    /// Cosine similarity of the chunk and the query vector.
    pub cosine: f64,
    /// That similarity counted from the model's floor, in proportion to the best: what the merge adds.
    pub score: f64,
}

/// What the `minScore` cut and `maxResults` did with a hit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    /// Kept: its file's name is the query.
    ExactPath,
    /// Kept: it holds what the query names exactly.
    ExactMatch,
    /// Kept: its score reaches `minScore`.
    Score,
    /// Kept: the vector leg alone scores it at `minScore` or more.
    VectorLeg,
    /// Kept: no hit reached `minScore`, so keyword matches answer instead.
    KeywordBackfill,
    /// Passed the cut, but `maxResults` hits rank above it.
    BeyondMaxResults,
    /// Cut: its score is below `minScore`.
    BelowMinScore,
}

impl Verdict {
    /// It is one of the results.
    pub fn kept(self) -> bool {
        !matches!(self, Verdict::BeyondMaxResults | Verdict::BelowMinScore)
    }

    /// Why, in words (the one wording `memory explain` and `explainPath` use).
    pub fn why(self) -> &'static str {
        match self {
            Verdict::ExactPath => "its file's name is the query",
            Verdict::ExactMatch => "it holds what the query names exactly",
            Verdict::Score => "its score reaches minScore",
            Verdict::VectorLeg => "the vector leg alone scores it at minScore or more",
            Verdict::KeywordBackfill => "no hit reached minScore, so keyword matches answer",
            Verdict::BeyondMaxResults => "it passes minScore, but maxResults hits rank above it",
            Verdict::BelowMinScore => "its score is below minScore",
        }
    }
}

/// Why a result's snippet shows the lines it shows.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SnippetReason {
    /// The first file line it shows (`None` for a transcript, whose lines are its records).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_line: Option<usize>,
    /// The last file line it shows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_line: Option<usize>,
    /// The whole chunk fits in a snippet.
    pub whole_chunk: bool,
    /// The query's words and word pairs on those lines (the window holding the most of their weight, rarer
    /// words weighing more).
    pub words: Vec<String>,
}

/// Where one note is in a search, and why.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PathExplanation {
    /// The path as asked.
    pub path: String,
    /// Where it is.
    pub verdict: PathVerdict,
    /// Its best place in the ranking, from 1, when a chunk of it was ranked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rank: Option<usize>,
    /// The reason in words, with what to do.
    pub detail: String,
}

/// Where a note is in a search.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PathVerdict {
    /// It is one of the results.
    Result,
    /// Ranked, but `maxResults` hits rank above it.
    BeyondMaxResults,
    /// Ranked, and cut by `minScore`.
    BelowMinScore,
    /// Indexed, but no leg brought it: no query word and not among the nearest vectors.
    NotACandidate,
    /// Indexed, and left out by the search's `sources`, `after` or `before`.
    OutsideScope,
    /// A memory file the index does not hold (yet).
    NotIndexed,
    /// A memory file the index skips: too large, binary, unreadable or not UTF-8.
    Skipped,
    /// No such file.
    Missing,
    /// A file that is not a memory file (the place or the name is not one memory indexes).
    NotMemoryFile,
}
