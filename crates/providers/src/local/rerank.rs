//! `LocalReranker`: a BERT cross-encoder (ms-marco-MiniLM-L-12-v2 and its kind: the encoder, its pooler and a
//! one-logit classifier) run in-process from a folder, as the local embedding model is: `model.safetensors`,
//! `tokenizer.json`, `config.json`. Each (query, passage) pair is one input, `[CLS] query [SEP] passage [SEP]`,
//! truncated to [`MAX_PAIR_TOKENS`] (the passage gives way first): the pooled `[CLS]` vector through the
//! classifier is the pair's relevance logit.

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use async_trait::async_trait;
use candle_core::{DType, Device, Module, Tensor};
use candle_nn::{Linear, VarBuilder};
use memory_core::rerank::{RerankError, Reranker};
use tokenizers::{Tokenizer, TruncationParams, TruncationStrategy};
use tracing::{debug, info, warn};

use super::bert::{cls_pool, BertModel};
use super::late::{self, LateInteractionReranker};
use super::load_once::LoadOnce;
use super::{forward_padded, read_weights, Loaded, LocalModelError, LocalModelInfo};

/// Tokens of one (query, passage) pair: the cost of a pair grows with it, and a snippet-sized passage fits.
pub const MAX_PAIR_TOKENS: usize = 192;
/// Pairs per forward pass: small enough that the deadline is checked often.
const PAIRS_PER_PASS: usize = 8;

struct Model {
    encoder: BertModel,
    pooler: Linear,
    classifier: Linear,
    tokenizer: Tokenizer,
    pad_id: u32,
}

/// A cross-encoder reranker from a model folder. Cheap to clone; the model loads once, on first use.
#[derive(Clone)]
pub struct LocalReranker {
    info: Arc<LocalModelInfo>,
    loaded: LoadOnce<Model>,
    /// One forward pass at a time: candle already uses every core for one.
    gate: Arc<tokio::sync::Semaphore>,
}

impl std::fmt::Debug for LocalReranker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalReranker").field("dir", &self.info.dir).finish()
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
    if late::is_late_interaction(&info.dir, |name| super::tensor_entry(&info.header, name).is_some()) {
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
        let has = |name: &str| super::tensor_entry(&info.header, name).is_some();
        if !has("classifier.weight") || !has("pooler.dense.weight") {
            return Err(LocalModelError::Invalid {
                path: info.dir.join("model.safetensors"),
                message: "not a cross-encoder: no `classifier.weight` / `pooler.dense.weight` (an embedding model cannot rerank)".into(),
            });
        }
        Ok(LocalReranker { info: Arc::new(info), loaded: LoadOnce::new(), gate: Arc::new(tokio::sync::Semaphore::new(1)) })
    }

    pub fn info(&self) -> &LocalModelInfo {
        &self.info
    }

    /// Load the weights now (otherwise the first `score` does).
    pub async fn load(&self) -> Result<(), RerankError> {
        self.model().await.map(|_| ())
    }

    fn failed(&self, message: String) -> RerankError {
        RerankError::Failed { reranker: self.info.name.clone(), message }
    }

    async fn model(&self) -> Result<Arc<Model>, RerankError> {
        let info = self.info.clone();
        let load = move || Model::load(&info).map_err(|e| RerankError::Failed { reranker: info.name.clone(), message: e.to_string() });
        self.loaded.get(load, |e| self.failed(e)).await
    }

    /// [`Reranker::score`] without a runtime (benchmarks, tools).
    pub fn score_blocking(&self, query: &str, passages: &[String], deadline: Instant) -> Result<Vec<f32>, RerankError> {
        let model = self.loaded.get_blocking(|| Model::load(&self.info).map_err(|e| self.failed(e.to_string())))?;
        model.score(&self.info.name, query, passages, deadline)
    }
}

#[async_trait]
impl Reranker for LocalReranker {
    fn id(&self) -> &str {
        &self.info.name
    }

    async fn score(&self, query: &str, passages: &[String], deadline: Instant) -> Result<Vec<f32>, RerankError> {
        if passages.is_empty() {
            return Ok(Vec::new());
        }
        let model = self.model().await?;
        let (name, query, passages) = (self.info.name.clone(), query.to_string(), passages.to_vec());
        score_off_runtime(&self.info.name, &self.gate, "cross-encoder", passages.len(), move || model.score(&name, &query, &passages, deadline)).await
    }
}

/// One reranking of `passages` passages by a loaded local model, as both local rerankers run it: one at a time
/// (`gate`: the model's forward passes already use every core) and off the async runtime.
pub(super) async fn score_off_runtime(
    name: &str,
    gate: &tokio::sync::Semaphore,
    kind: &'static str,
    passages: usize,
    score: impl FnOnce() -> Result<Vec<f32>, RerankError> + Send + 'static,
) -> Result<Vec<f32>, RerankError> {
    let failed = |message: String| RerankError::Failed { reranker: name.to_string(), message };
    let _permit = gate.acquire().await.map_err(|_| failed("reranker closed".into()))?;
    let started = Instant::now();
    let out = tokio::task::spawn_blocking(score).await.map_err(|e| failed(format!("reranking task failed: {e}")))??;
    debug!(kind, passages, ms = started.elapsed().as_millis() as u64, "reranked");
    Ok(out)
}

impl Model {
    fn load(info: &LocalModelInfo) -> Result<Model, LocalModelError> {
        let started = Instant::now();
        let path = info.dir.join("model.safetensors");
        let (mut weights, words) = read_weights(info, &path)?;
        let h = info.config.hidden_size;
        let mut take = |name: &str| -> Result<Tensor, LocalModelError> {
            ["bert.", ""]
                .iter()
                .find_map(|p| weights.take_float(&format!("{p}{name}")))
                .ok_or_else(|| LocalModelError::Invalid { path: path.clone(), message: format!("no `{name}`") })?
                .map_err(|e| LocalModelError::Model(format!("`{name}`: {e}")))
        };
        let pooler = Linear::new(take("pooler.dense.weight")?, Some(take("pooler.dense.bias")?));
        let classifier_w = take("classifier.weight")?;
        if classifier_w.dims() != [1, h] {
            return Err(LocalModelError::Invalid {
                path,
                message: format!("classifier is {:?}, expected [1, {h}]: one relevance logit", classifier_w.dims()),
            });
        }
        let classifier = Linear::new(classifier_w, Some(take("classifier.bias")?));
        let vb = VarBuilder::from_tensors(std::mem::take(&mut weights.floats), DType::F32, &Device::Cpu);
        let encoder = BertModel::load(vb, &info.config, Some(words), &mut weights.int8).map_err(|e| LocalModelError::Model(e.to_string()))?;
        let (mut tokenizer, pad_id) = Loaded::load_tokenizer(info)?;
        tokenizer
            .with_truncation(Some(TruncationParams {
                max_length: MAX_PAIR_TOKENS.min(info.max_seq_length),
                strategy: TruncationStrategy::OnlySecond,
                stride: 0,
                ..TruncationParams::default()
            }))
            .map_err(|e| LocalModelError::Tokenizer(e.to_string()))?;
        info!(dir = %info.dir.display(), layers = info.config.num_hidden_layers, ms = started.elapsed().as_millis() as u64, "local reranker loaded");
        Ok(Model { encoder, pooler, classifier, tokenizer, pad_id })
    }

    /// Logits of (query, passage) pairs, [`PAIRS_PER_PASS`] a pass, longest first; over budget once `deadline`
    /// passes between passes. Blocking (CPU-bound).
    fn score(&self, name: &str, query: &str, passages: &[String], deadline: Instant) -> Result<Vec<f32>, RerankError> {
        let failed = |message: String| RerankError::Failed { reranker: name.to_string(), message };
        let model_err = |e: candle_core::Error| failed(e.to_string());
        let budget_ms = deadline.saturating_duration_since(Instant::now()).as_millis() as u64;
        let mut encodings = Vec::with_capacity(passages.len());
        for p in passages {
            // A query longer than the pair allows cannot be truncated by OnlySecond: cut it by hand.
            let enc = match self.tokenizer.encode((query, p.as_str()), true) {
                Ok(e) => e,
                Err(_) => {
                    let short: String = query.chars().take(MAX_PAIR_TOKENS * 2).collect();
                    let mut e = self.tokenizer.encode((short.as_str(), p.as_str()), true).map_err(|e| failed(e.to_string()))?;
                    e.truncate(MAX_PAIR_TOKENS, 0, tokenizers::TruncationDirection::Right);
                    e
                }
            };
            encodings.push(enc);
        }
        let mut order: Vec<usize> = (0..passages.len()).collect();
        order.sort_by_key(|i| std::cmp::Reverse(encodings[*i].get_ids().len()));
        let mut out = vec![f32::NAN; passages.len()];
        for group in order.chunks(PAIRS_PER_PASS) {
            if Instant::now() >= deadline {
                return Err(RerankError::OverBudget { budget_ms });
            }
            let (hidden, _mask) = forward_padded(&self.encoder, &encodings, group, self.pad_id).map_err(model_err)?;
            let pooled = self.pooler.forward(&cls_pool(&hidden).map_err(model_err)?).map_err(model_err)?.tanh().map_err(model_err)?;
            let logits: Vec<Vec<f32>> = self.classifier.forward(&pooled).map_err(model_err)?.to_vec2().map_err(model_err)?;
            for (i, row) in group.iter().zip(logits) {
                out[*i] = row.first().copied().unwrap_or(f32::NAN);
            }
        }
        Ok(out)
    }
}
