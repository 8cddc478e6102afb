//! `LocalReranker`: a BERT cross-encoder ([`model_runtime::CrossEncoder`]: ms-marco-MiniLM-L-12-v2 and its kind)
//! run in-process from a folder, as the local embedding model is, behind [`Reranker`]; which kind of reranker a
//! folder holds ([`open_reranker`]); and the reranker `memory.search.query.rerank` asks for.

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use async_trait::async_trait;
use memory_core::rerank::{RerankError, Reranker};
use model_runtime::{CrossEncoder, ScoreError};
use tracing::{debug, info, warn};

use super::late::LateInteractionReranker;
use super::load_once::LoadOnce;
use super::{LocalModelError, LocalModelInfo};

/// A cross-encoder reranker from a model folder. Cheap to clone; the model loads once, on first use.
#[derive(Clone)]
pub struct LocalReranker {
    model: LocalModel<CrossEncoder>,
}

impl std::fmt::Debug for LocalReranker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalReranker").field("dir", &self.model.info.dir).finish()
    }
}

/// The reranker `memory.search.query.rerank` asks for: `None` when it is off. Its kind (cross-encoder or late
/// interaction) is read from the folder ([`open_reranker`]). When its folder cannot be used (missing, neither
/// kind, a damaged header or `artifact.metadata`) the reranker is [`memory_core::rerank::Unavailable`]: not
/// silent, since every search's `warnings` and `memory status` name the key and the cause, but the memory still
/// answers (in first-stage order), as it does when the weights prove unreadable at first use. A missing
/// `modelPath` is a config error (checked with the config).
pub fn reranker_from_config(config: &memory_core::Config) -> memory_core::Result<Option<Arc<dyn Reranker>>> {
    let r = &config.memory.search.query.rerank;
    if !r.enabled {
        return Ok(None);
    }
    let path = r
        .model_path
        .as_deref()
        .filter(|p| !p.trim().is_empty())
        .ok_or_else(|| memory_core::MemoryError::config("memory.search.query.rerank.modelPath", "is required when rerank.enabled is true"))?;
    let dir = memory_core::paths::expand_home(path);
    match open_reranker(&dir) {
        Ok(rr) => {
            info!(dir = %dir.display(), kind = ?rr.kind(), "reranker opened");
            Ok(Some(rr.into_shared()))
        }
        // Searches still answer, in first-stage order, each saying why ([`memory_core::rerank::Unavailable`]).
        Err(e) => {
            let why = format!("memory.search.query.rerank.modelPath: {e}");
            warn!(error = %why, "the reranker cannot be opened; searches answer without reranking");
            let id = dir.file_name().map_or_else(|| dir.display().to_string(), |n| n.to_string_lossy().into_owned());
            Ok(Some(Arc::new(memory_core::rerank::Unavailable::new(id, why))))
        }
    }
}

/// Which second stage a model folder holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RerankerKind {
    /// Reads the query and a passage together; one relevance logit per pair ([`LocalReranker`]).
    CrossEncoder,
    /// Encodes the query and each passage apart, token by token; MaxSim ([`LateInteractionReranker`]).
    LateInteraction,
}

/// A reranker of either kind, from a model folder.
#[derive(Debug, Clone)]
pub enum FolderReranker {
    CrossEncoder(LocalReranker),
    LateInteraction(LateInteractionReranker),
}

/// The reranker in a model folder, its kind read from the files: a late-interaction model (a ColBERT projection
/// `linear.weight`, ColBERT's `artifact.metadata`, or `HF_ColBERT` in `config.json`), else a cross-encoder (a
/// `classifier.weight` and `pooler.dense.weight`); neither is an error that says what was looked for.
pub fn open_reranker(dir: impl AsRef<Path>) -> Result<FolderReranker, LocalModelError> {
    let dir = dir.as_ref();
    let info = LocalModelInfo::inspect(dir)?;
    if model_runtime::is_late_interaction(&info.dir, |name| info.has_tensor(name)) {
        return LateInteractionReranker::open(dir).map(FolderReranker::LateInteraction);
    }
    LocalReranker::open(dir).map(FolderReranker::CrossEncoder).map_err(|e| match e {
        LocalModelError::Invalid { path, .. } => LocalModelError::Invalid {
            path,
            message: "neither a cross-encoder (`classifier.weight` and `pooler.dense.weight`) nor a late-interaction model (`linear.weight`, `artifact.metadata` or HF_ColBERT in config.json): an embedding model cannot rerank".into(),
        },
        other => other,
    })
}

impl FolderReranker {
    pub fn kind(&self) -> RerankerKind {
        match self {
            FolderReranker::CrossEncoder(_) => RerankerKind::CrossEncoder,
            FolderReranker::LateInteraction(_) => RerankerKind::LateInteraction,
        }
    }

    pub fn info(&self) -> &LocalModelInfo {
        match self {
            FolderReranker::CrossEncoder(r) => r.info(),
            FolderReranker::LateInteraction(r) => r.info(),
        }
    }

    /// [`Reranker::score`] without a runtime (benchmarks, tools).
    pub fn score_blocking(&self, query: &str, passages: &[String], deadline: Instant) -> Result<Vec<f32>, RerankError> {
        match self {
            FolderReranker::CrossEncoder(r) => r.score_blocking(query, passages, deadline),
            FolderReranker::LateInteraction(r) => r.score_blocking(query, passages, deadline),
        }
    }

    pub fn into_shared(self) -> Arc<dyn Reranker> {
        match self {
            FolderReranker::CrossEncoder(r) => Arc::new(r),
            FolderReranker::LateInteraction(r) => Arc::new(r),
        }
    }
}

impl LocalReranker {
    /// Inspect a model folder (cheap); the weights load on first use or [`load`](Self::load).
    pub fn open(dir: impl AsRef<Path>) -> Result<Self, LocalModelError> {
        let info = LocalModelInfo::inspect(dir.as_ref())?;
        CrossEncoder::check(&info)?;
        Ok(LocalReranker { model: LocalModel::new(info, CrossEncoder::load) })
    }

    pub fn info(&self) -> &LocalModelInfo {
        &self.model.info
    }

    /// Load the weights now (otherwise the first `score` does).
    pub async fn load(&self) -> Result<(), RerankError> {
        self.model.get().await.map(|_| ())
    }

    /// [`Reranker::score`] without a runtime (benchmarks, tools).
    pub fn score_blocking(&self, query: &str, passages: &[String], deadline: Instant) -> Result<Vec<f32>, RerankError> {
        self.model.score_blocking(query, passages, deadline, CrossEncoder::score)
    }
}

#[async_trait]
impl Reranker for LocalReranker {
    fn id(&self) -> &str {
        &self.model.info.name
    }

    async fn score(&self, query: &str, passages: &[String], deadline: Instant) -> Result<Vec<f32>, RerankError> {
        self.model.score("cross-encoder", query, passages, deadline, CrossEncoder::score).await
    }
}

/// A scoring pass's error as the reranker `name` reports it.
pub(super) fn rerank_error(name: &str, e: ScoreError) -> RerankError {
    match e {
        ScoreError::Failed(message) => RerankError::Failed { reranker: name.to_string(), message },
        ScoreError::OverBudget { budget_ms } => RerankError::OverBudget { budget_ms },
    }
}

/// How a loaded local reranker scores a query against passages.
pub(super) type Score<M> = fn(&M, &str, &[String], Instant) -> Result<Vec<f32>, ScoreError>;

/// How a local reranker's model loads from its folder.
type Load<M> = dyn Fn(&LocalModelInfo) -> Result<M, LocalModelError> + Send + Sync;

/// What both local rerankers hold and do alike: the folder, the model loaded from it once, on first use (by
/// `load`), and the scoring, one at a time (`gate`: the model's forward passes already use every core) and off the
/// async runtime.
pub(super) struct LocalModel<M> {
    pub(super) info: Arc<LocalModelInfo>,
    load: Arc<Load<M>>,
    loaded: LoadOnce<M>,
    gate: Arc<tokio::sync::Semaphore>,
}

impl<M> Clone for LocalModel<M> {
    fn clone(&self) -> Self {
        LocalModel { info: self.info.clone(), load: self.load.clone(), loaded: self.loaded.clone(), gate: self.gate.clone() }
    }
}

impl<M: Send + Sync + 'static> LocalModel<M> {
    pub(super) fn new(info: LocalModelInfo, load: impl Fn(&LocalModelInfo) -> Result<M, LocalModelError> + Send + Sync + 'static) -> Self {
        LocalModel { info: Arc::new(info), load: Arc::new(load), loaded: LoadOnce::new(), gate: Arc::new(tokio::sync::Semaphore::new(1)) }
    }

    fn failed(&self, message: String) -> RerankError {
        RerankError::Failed { reranker: self.info.name.clone(), message }
    }

    /// The model, loaded off the runtime the first time.
    pub(super) async fn get(&self) -> Result<Arc<M>, RerankError> {
        let (info, load) = (self.info.clone(), self.load.clone());
        let load = move || load(&info).map_err(|e| RerankError::Failed { reranker: info.name.clone(), message: e.to_string() });
        self.loaded.get(load, |e| self.failed(e)).await
    }

    /// The model, loaded in this thread the first time.
    pub(super) fn get_blocking(&self) -> Result<Arc<M>, RerankError> {
        self.loaded.get_blocking(|| (self.load)(&self.info).map_err(|e| self.failed(e.to_string())))
    }

    /// [`Reranker::score`] without a runtime.
    pub(super) fn score_blocking(&self, query: &str, passages: &[String], deadline: Instant, score: Score<M>) -> Result<Vec<f32>, RerankError> {
        score(&*self.get_blocking()?, query, passages, deadline).map_err(|e| rerank_error(&self.info.name, e))
    }

    /// [`Reranker::score`]: nothing to load for no passages; `kind` names the model in the log.
    pub(super) async fn score(
        &self,
        kind: &'static str,
        query: &str,
        passages: &[String],
        deadline: Instant,
        score: Score<M>,
    ) -> Result<Vec<f32>, RerankError> {
        if passages.is_empty() {
            return Ok(Vec::new());
        }
        let model = self.get().await?;
        let (name, query, passages) = (self.info.name.clone(), query.to_string(), passages.to_vec());
        let n = passages.len();
        let _permit = self.gate.acquire().await.map_err(|_| self.failed("reranker closed".into()))?;
        let started = Instant::now();
        let out = tokio::task::spawn_blocking(move || score(&model, &query, &passages, deadline).map_err(|e| rerank_error(&name, e)))
            .await
            .map_err(|e| self.failed(format!("reranking task failed: {e}")))??;
        debug!(kind, passages = n, ms = started.elapsed().as_millis() as u64, "reranked");
        Ok(out)
    }
}
