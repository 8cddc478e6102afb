//! `memory.search.query`: how a search ranks and cuts its results (the hybrid merge, MMR, temporal decay, the
//! second-stage reranker).

use serde::{Deserialize, Serialize};

/// `memory.search.query`: how many results a search returns, which pass, and how candidates are ranked.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct QueryConfig {
    /// `memory.search.query.maxResults`: results a search returns when the request does not say (default 6; at
    /// least 1). The flat `maxResults` key is read as this.
    pub max_results: usize,
    /// `memory.search.query.minScore`: the lowest score a result may have when the request does not say (0 to 1;
    /// default 0.35). Exact-path and exact matches pass whatever their score, and so does a hit the vector leg
    /// alone scores at this or more; when nothing passes, keyword matches are returned instead of nothing.
    pub min_score: f64,
    /// `memory.search.query.now`: the moment searches are asked at, for replays, tests and evaluations: a date
    /// (`2026-03-04`) or a date and time with an offset (`2026-03-04T21:30:00+08:00`). What "yesterday" and "last
    /// week" mean and what temporal decay counts from. Unset: the clock, in this machine's time zone.
    pub now: Option<String>,
    /// `memory.search.query.hybrid`: how the keyword and vector legs are combined.
    pub hybrid: HybridConfig,
    /// `memory.search.query.rerank`: the optional second-stage reranker.
    pub rerank: RerankConfig,
}

impl Default for QueryConfig {
    fn default() -> Self {
        QueryConfig { max_results: 6, min_score: 0.35, now: None, hybrid: HybridConfig::default(), rerank: RerankConfig::default() }
    }
}

/// `memory.search.query.rerank`: a second model reads the query with each of the best candidates and its score
/// is folded into theirs (`memory_core::rerank::fold`): a cross-encoder (the pair read together) or a
/// late-interaction model (ColBERT: query and passage encoded apart, token vectors compared), the kind told by
/// the model folder's files. Off by default: it costs a model load and tens of milliseconds per candidate on a
/// CPU.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct RerankConfig {
    /// `memory.search.query.rerank.enabled`: rerank the best candidates with the model at `modelPath` (default
    /// false; `modelPath` is then required).
    pub enabled: bool,
    /// `memory.search.query.rerank.modelPath`: the reranker's folder (`model.safetensors`, `tokenizer.json`,
    /// `config.json`; a late-interaction model also `artifact.metadata` or a `linear.weight` projection); `~`
    /// allowed. Unset by default.
    pub model_path: Option<String>,
    /// `memory.search.query.rerank.candidates`: how many of the best candidates are reranked (default 10; at least
    /// 1 when reranking is on); the rest keep their order below them. Each one costs a model pass.
    pub candidates: usize,
    /// `memory.search.query.rerank.budgetMs`: time budget of one reranking, in milliseconds (default 2000): past it
    /// the first-stage order answers, with a warning.
    pub budget_ms: u64,
    /// `memory.search.query.rerank.weight`: the reranker's share in the folded order (0..1, default 0.5; both sides
    /// scaled over the candidates first).
    pub weight: f64,
}

impl Default for RerankConfig {
    fn default() -> Self {
        RerankConfig { enabled: false, model_path: None, candidates: 10, budget_ms: 2000, weight: 0.5 }
    }
}

/// `memory.search.query.hybrid`: a search asks a keyword (BM25) leg and a vector leg for candidates and merges
/// their scores; these keys weigh the two and set the re-orderings that follow.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct HybridConfig {
    /// `memory.search.query.hybrid.enabled`: searches ask the vector leg too (default true); false: searches
    /// match words only (a sync still embeds).
    pub enabled: bool,
    /// `memory.search.query.hybrid.vectorWeight`: the vector leg's weight in the merged score (default 0.7). The
    /// two weights are normalised to sum 1 over the legs that answered, and each is scaled per query by how
    /// decisively its leg separates its candidates; both must be >= 0 and not both 0.
    pub vector_weight: f64,
    /// `memory.search.query.hybrid.textWeight`: the keyword leg's weight in the merged score (default 0.3).
    pub text_weight: f64,
    /// `memory.search.query.hybrid.candidateMultiplier`: each leg is asked for `maxResults` (at least 10) times
    /// this many candidates, at most 200 (default 4; at least 1).
    pub candidate_multiplier: usize,
    /// `memory.search.query.hybrid.mmr`: diversity re-ordering.
    pub mmr: MmrConfig,
    /// `memory.search.query.hybrid.temporalDecay`: older notes score lower.
    pub temporal_decay: TemporalDecayConfig,
}

impl Default for HybridConfig {
    fn default() -> Self {
        HybridConfig {
            enabled: true,
            vector_weight: 0.7,
            text_weight: 0.3,
            candidate_multiplier: 4,
            mmr: MmrConfig::default(),
            temporal_decay: TemporalDecayConfig::default(),
        }
    }
}

/// `memory.search.query.hybrid.mmr`: maximal marginal relevance, which moves results that repeat one ranked
/// above them further down.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct MmrConfig {
    /// `memory.search.query.hybrid.mmr.enabled`: re-order the ranked candidates by MMR before the `minScore` cut
    /// (default false); exact-path hits and exact matches stay first.
    pub enabled: bool,
    /// `memory.search.query.hybrid.mmr.lambda`: relevance against diversity, 0 to 1 (default 0.7): 1 keeps the
    /// relevance order, lower values push near-duplicates down further.
    pub lambda: f64,
}

impl Default for MmrConfig {
    fn default() -> Self {
        MmrConfig { enabled: false, lambda: 0.7 }
    }
}

/// `memory.search.query.hybrid.temporalDecay`: scores multiplied by exp(-ln 2 / halfLifeDays x age in days). A
/// daily note's age counts from the date in its name, another file's from its modification time; `MEMORY.md` and
/// undated files under `memory/` do not decay.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct TemporalDecayConfig {
    /// `memory.search.query.hybrid.temporalDecay.enabled`: apply the decay (default false).
    pub enabled: bool,
    /// `memory.search.query.hybrid.temporalDecay.halfLifeDays`: the age, in days, at which a score is halved
    /// (default 30; > 0).
    pub half_life_days: f64,
}

impl Default for TemporalDecayConfig {
    fn default() -> Self {
        TemporalDecayConfig { enabled: false, half_life_days: 30.0 }
    }
}
