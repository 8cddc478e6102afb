//! `local`: a sentence-embedding model run in-process, pure Rust, no network: a folder on disk (BERT-style
//! checkpoints such as all-MiniLM-L6-v2, bge-small, e5-small, multilingual-e5-small; XLM-RoBERTa ones such as
//! paraphrase-multilingual-mpnet-base-v2, bge-m3, multilingual-e5-base/large; MPNet ones such as all-mpnet-base-v2)
//! or a `.gguf` file (EmbeddingGemma, nomic-embed-text, BERT-family embedders). The model itself (file readers,
//! tokenizers, kernels, graphs, pooling, prompts as the files declare them) is the `model-runtime` crate; this
//! module adapts it to [`EmbeddingProvider`] and [`Reranker`](memory_core::rerank::Reranker): loading once on first
//! use off the async runtime, one forward pass at a time, errors as [`EmbeddingError`] / `RerankError`.
//!
//! What a folder must hold and how it is read (`model.safetensors` and `tokenizer.json` required, `config.json`,
//! the sentence-transformers pooling, `max_seq_length` and prompts files when present) is
//! [`model_runtime::FolderModelInfo`]'s to say; the prompts are chosen by `memory.search.queryInputType` /
//! `documentInputType` when set, or given literally by `memory.search.local.queryPrompt` / `documentPrompt`.
//!
//! The model loads on the first `embed` (or [`LocalProvider::load`]); `open` only reads small files.

mod gguf_model;
mod late;
mod load_once;
mod rerank;

use std::fmt;
use std::path::Path;
use std::sync::Arc;

use async_trait::async_trait;
use memory_core::embedding::{EmbeddingError, EmbeddingProvider, EmbeddingPurpose};
use model_runtime::FolderEncoder;
use tracing::{debug, warn};

use gguf_model::GgufProvider;
pub use late::LateInteractionReranker;
pub use model_runtime::{
    is_gguf, maxsim, Architecture, BertConfig, Conventions as LateInteractionConventions, FolderModelInfo as LocalModelInfo, GgufModelInfo,
    ModelError as LocalModelError, ModelOptions as LocalOptions, Pooling, Prompts, MAX_PAIR_TOKENS,
};
pub use rerank::{open_reranker, reranker_from_config, FolderReranker, LocalReranker, RerankerKind};

const PROVIDER: &str = "local";

/// A runtime error as the embedding provider reports it: a missing folder or file is not configured (`auto`
/// passes over it), anything else permanent.
pub(crate) fn embedding_error(e: LocalModelError) -> EmbeddingError {
    match e {
        LocalModelError::MissingFolder(_) | LocalModelError::MissingFile { .. } => {
            EmbeddingError::NotConfigured { provider: PROVIDER.into(), message: e.to_string() }
        }
        other => EmbeddingError::Permanent { provider: PROVIDER.into(), message: other.to_string() },
    }
}

/// Why a local embedding model is not there when the thread loading it died.
fn load_task_lost(message: String) -> EmbeddingError {
    EmbeddingError::Permanent { provider: PROVIDER.into(), message }
}

/// Whether `dir` looks like a usable model folder (the files `auto` selection checks for).
pub fn model_folder_present(dir: &Path) -> bool {
    dir.join("model.safetensors").is_file() && dir.join("tokenizer.json").is_file()
}

/// The `local` provider: a model folder or a `.gguf` file. Cheap to clone; the model is loaded once and shared.
#[derive(Clone)]
pub struct LocalProvider {
    imp: Imp,
}

#[derive(Clone)]
enum Imp {
    Folder(FolderProvider),
    Gguf(Arc<GgufProvider>),
}

/// A model folder (safetensors and tokenizer.json).
#[derive(Clone)]
struct FolderProvider {
    info: Arc<LocalModelInfo>,
    loaded: load_once::LoadOnce<FolderEncoder>,
    /// One forward pass at a time: candle already uses every core for one.
    gate: Arc<tokio::sync::Semaphore>,
}

impl fmt::Debug for LocalProvider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.imp {
            Imp::Folder(p) => p.fmt(f),
            Imp::Gguf(p) => f.debug_struct("LocalProvider").field("file", &p.info.path).field("dims", &p.info.dimensions).finish(),
        }
    }
}

impl fmt::Debug for FolderProvider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LocalProvider")
            .field("dir", &self.info.dir)
            .field("dims", &self.info.config.hidden_size)
            .field("max_seq_length", &self.info.max_seq_length)
            .field("pooling", &self.info.pooling)
            .field("loaded", &self.loaded.is_loaded())
            .finish()
    }
}

impl LocalProvider {
    /// Inspect a model folder or a `.gguf` file (cheap but for a GGUF file's digest); the weights load on first
    /// use.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, LocalModelError> {
        Self::open_with(path, &LocalOptions::default())
    }

    /// [`open`](Self::open) with prompts from the config.
    pub fn open_with(path: impl AsRef<Path>, options: &LocalOptions) -> Result<Self, LocalModelError> {
        let path = path.as_ref();
        if path.is_file() {
            if !is_gguf(path) {
                return Err(LocalModelError::Invalid {
                    path: path.into(),
                    message: "not a GGUF file; local.modelPath names a .gguf file or a model folder".into(),
                });
            }
            return Ok(LocalProvider { imp: Imp::Gguf(Arc::new(GgufProvider::open(path, options)?)) });
        }
        if options.dimensions.is_some() {
            warn!(dir = %path.display(), "memory.search.outputDimensionality is not used by a model folder: its vectors keep their width");
        }
        let info = LocalModelInfo::inspect_with(path, options)?;
        debug!(dir = %info.dir.display(), fingerprint = %info.fingerprint, "local model folder inspected");
        Ok(LocalProvider {
            imp: Imp::Folder(FolderProvider {
                info: Arc::new(info),
                loaded: load_once::LoadOnce::new(),
                gate: Arc::new(tokio::sync::Semaphore::new(1)),
            }),
        })
    }

    /// What the model folder holds (`None` for a GGUF file: [`gguf_info`](Self::gguf_info)).
    pub fn info(&self) -> Option<&LocalModelInfo> {
        match &self.imp {
            Imp::Folder(p) => Some(&p.info),
            Imp::Gguf(_) => None,
        }
    }

    /// What the GGUF file holds (`None` for a folder).
    pub fn gguf_info(&self) -> Option<&GgufModelInfo> {
        match &self.imp {
            Imp::Gguf(p) => Some(&p.info),
            Imp::Folder(_) => None,
        }
    }

    /// Load the weights now (otherwise the first `embed` does).
    pub async fn load(&self) -> Result<(), EmbeddingError> {
        match &self.imp {
            Imp::Folder(p) => p.loaded().await.map(|_| ()),
            Imp::Gguf(p) => p.loaded().await.map(|_| ()),
        }
    }

    /// Token ids of `text` as a GGUF model's tokenizer gives them (prompt not added); `None` for a folder.
    pub fn gguf_tokens(&self, text: &str) -> Option<Result<Vec<u32>, EmbeddingError>> {
        match &self.imp {
            Imp::Gguf(p) => Some(p.loaded_blocking().map(|l| l.tokens(text))),
            Imp::Folder(_) => None,
        }
    }

    /// Blocking embed with the purpose's prompt.
    pub fn embed_blocking_as(&self, texts: &[String], purpose: EmbeddingPurpose) -> Result<Vec<Vec<f32>>, EmbeddingError> {
        match &self.imp {
            Imp::Folder(p) => p.embed_blocking_as(texts, purpose),
            Imp::Gguf(p) => {
                let loaded = p.loaded_blocking()?;
                loaded.embed(&p.info, &p.prompted(texts, purpose)).map_err(embedding_error)
            }
        }
    }
}

impl FolderProvider {
    async fn loaded(&self) -> Result<Arc<FolderEncoder>, EmbeddingError> {
        let info = self.info.clone();
        self.loaded.get(move || FolderEncoder::load(&info).map_err(embedding_error), load_task_lost).await
    }

    /// Blocking embed with the purpose's prompt.
    pub fn embed_blocking_as(&self, texts: &[String], purpose: EmbeddingPurpose) -> Result<Vec<Vec<f32>>, EmbeddingError> {
        let texts = self.prompted(texts, purpose);
        let loaded = self.loaded.get_blocking(|| FolderEncoder::load(&self.info)).map_err(embedding_error)?;
        loaded.embed(&self.info, &texts).map_err(embedding_error)
    }

    /// The texts with the purpose's prompt in front.
    fn prompted(&self, texts: &[String], purpose: EmbeddingPurpose) -> Vec<String> {
        prompted(&self.info.prompts, texts, purpose)
    }
}

#[async_trait]
impl EmbeddingProvider for LocalProvider {
    fn id(&self) -> &str {
        PROVIDER
    }

    fn model(&self) -> &str {
        match &self.imp {
            Imp::Folder(p) => &p.info.name,
            Imp::Gguf(p) => &p.info.name,
        }
    }

    fn dimensions(&self) -> Option<usize> {
        match &self.imp {
            Imp::Folder(p) => Some(p.info.config.hidden_size),
            Imp::Gguf(p) => Some(p.info.dimensions),
        }
    }

    /// A folder's: its architecture, tokenizer and a sample of its weights; a GGUF file's: its SHA-256.
    fn fingerprint(&self) -> String {
        match &self.imp {
            Imp::Folder(p) => p.info.fingerprint.clone(),
            Imp::Gguf(p) => p.info.fingerprint.clone(),
        }
    }

    /// Queries and documents get the model's prompts (none for most sentence-transformers models).
    async fn embed(&self, texts: &[String], purpose: EmbeddingPurpose) -> Result<Vec<Vec<f32>>, EmbeddingError> {
        match &self.imp {
            Imp::Folder(p) => p.embed(texts, purpose).await,
            Imp::Gguf(p) => p.embed(texts, purpose).await,
        }
    }
}

impl FolderProvider {
    async fn embed(&self, texts: &[String], purpose: EmbeddingPurpose) -> Result<Vec<Vec<f32>>, EmbeddingError> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        let loaded = self.loaded().await?;
        let info = self.info.clone();
        let texts = self.prompted(texts, purpose);
        embed_gated(&self.gate, texts, self.info.config.hidden_size, move |texts| loaded.embed(&info, texts)).await
    }
}

/// One embedding pass of a loaded model off the async runtime, one pass at a time (`gate`: a pass uses every
/// core), checked: as many vectors as texts, each `dims` wide.
async fn embed_gated(
    gate: &tokio::sync::Semaphore,
    texts: Vec<String>,
    dims: usize,
    run: impl FnOnce(&[String]) -> Result<Vec<Vec<f32>>, LocalModelError> + Send + 'static,
) -> Result<Vec<Vec<f32>>, EmbeddingError> {
    let _permit = gate.acquire().await.map_err(|_| EmbeddingError::Permanent { provider: PROVIDER.into(), message: "provider closed".into() })?;
    let n = texts.len();
    let started = std::time::Instant::now();
    let vectors = tokio::task::spawn_blocking(move || run(&texts))
        .await
        .map_err(|e| EmbeddingError::Permanent { provider: PROVIDER.into(), message: format!("embedding task failed: {e}") })?
        .map_err(embedding_error)?;
    debug!(texts = n, ms = started.elapsed().as_millis() as u64, "local embedding done");
    if vectors.len() != n || vectors.iter().any(|v| v.len() != dims) {
        return Err(EmbeddingError::Permanent { provider: PROVIDER.into(), message: "model produced a malformed batch".into() });
    }
    Ok(vectors)
}

/// `texts` with the purpose's prompt in front (as they are when the prompt is empty).
fn prompted(prompts: &model_runtime::Prompts, texts: &[String], purpose: EmbeddingPurpose) -> Vec<String> {
    let prompt = match purpose {
        EmbeddingPurpose::Query => &prompts.query,
        EmbeddingPurpose::Document => &prompts.document,
    };
    if prompt.is_empty() {
        texts.to_vec()
    } else {
        texts.iter().map(|t| format!("{prompt}{t}")).collect()
    }
}
