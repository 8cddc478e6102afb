//! `local`: a sentence-embedding model run in-process from a folder on disk, pure Rust (candle + tokenizers),
//! no network. BERT-style checkpoints (all-MiniLM-L6-v2, bge-small, e5-small, multilingual-e5-small...),
//! XLM-RoBERTa ones (paraphrase-multilingual-mpnet-base-v2, bge-m3, multilingual-e5-base/large) and MPNet ones
//! (all-mpnet-base-v2). The tokenizer is whatever `tokenizer.json` describes: WordPiece for BERT, SentencePiece
//! Unigram (with its normaliser and Metaspace) for the XLM-R family.
//!
//! - `model.safetensors` and `tokenizer.json` are required; `config.json` (the BERT config) is read when
//!   present. A folder whose `config.json` is a sentence-transformers pooling config (as when a model's
//!   `1_Pooling/config.json` was copied over it) still loads: the architecture is read from the weights' shapes.
//! - Padding and truncation fixed in `tokenizer.json` (MiniLM fixes padding at 128) are replaced: each batch is
//!   padded to its longest text, and texts are truncated at the model's `max_seq_length`
//!   (`sentence_bert_config.json`, else the position-embedding count, at most 512).
//! - Pooling as the sentence-transformers files say (`modules.json` names the Pooling module's folder, else
//!   `1_Pooling/config.json`): mean over real tokens (attention mask), `[CLS]`, or max; modules this provider
//!   cannot run (a Dense projection) are refused, not skipped. Vectors are then L2-normalised (the index
//!   compares by cosine, so this changes no ranking even for a model without a Normalize module).
//! - Prompts: query and document texts get the model's prompts (`config_sentence_transformers.json`
//!   `prompts`, e.g. E5's `"query: "` / `"passage: "`), chosen by `memory.search.queryInputType` /
//!   `documentInputType` when set, or given literally by `memory.search.local.queryPrompt` / `documentPrompt`.
//!   A folder named like an E5 model without prompts gets E5's.
//!
//! The model loads on the first `embed` (or [`LocalProvider::load`]); `open` only reads small files. Loading
//! reads every tensor but the word embeddings, whose rows are read from the file as tokens need them (a
//! multilingual vocabulary is 80% of the weights and a query needs a few dozen rows).

mod bert;
mod f16;
mod gemma;
mod gguf;
mod gguf_model;
mod int8;
mod late;
mod load_once;
mod nomic;
mod plain;
mod q8;
mod rerank;
mod spm;
mod wordpiece;

use std::collections::HashMap;
use std::fmt;
use std::fs;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use memory_core::embedding::{sanitize_and_normalize, EmbeddingError, EmbeddingProvider, EmbeddingPurpose};
use serde_json::Value;
use tokenizers::{Tokenizer, TruncationParams, TruncationStrategy};
use tracing::{debug, info, warn};

use bert::{cls_pool, max_pool, mean_pool, BertModel, WordRows};
pub use bert::{Architecture, BertConfig};
pub use gguf::is_gguf;
pub use gguf_model::GgufModelInfo;
use gguf_model::GgufProvider;
pub use late::{maxsim, Conventions as LateInteractionConventions, LateInteractionReranker};
pub use rerank::{open_reranker, reranker_from_config, FolderReranker, LocalReranker, RerankerKind, MAX_PAIR_TOKENS};

const PROVIDER: &str = "local";
/// Padded tokens per forward pass (batch x longest), bounding memory and keeping batches of similar length.
const TOKENS_PER_PASS: usize = 8192;
const MAX_TEXTS_PER_PASS: usize = 64;
/// Inputs of at most this many tokens in all (a search query) run on one thread: for matrices this small,
/// splitting each product over threads costs more than it saves while other work keeps the cores busy (one-shot
/// hybrid search through the shared server, MiniLM, two busy processes beside it: 32.7-37.7 ms against 40.4-44.3
/// ms on every core; no difference on a quiet machine).
const ONE_THREAD_MAX_TOKENS: usize = 64;

/// The one-thread pool short inputs run in (candle's products split over the pool they run in); `None` when it
/// cannot be made (then they run as any other input).
fn one_thread_pool() -> Option<&'static rayon::ThreadPool> {
    static POOL: std::sync::OnceLock<Option<rayon::ThreadPool>> = std::sync::OnceLock::new();
    POOL.get_or_init(|| match rayon::ThreadPoolBuilder::new().num_threads(1).thread_name(|_| "embed-short".into()).build() {
        Ok(pool) => Some(pool),
        Err(e) => {
            warn!(error = %e, "cannot start the thread for short inputs; they run on every core");
            None
        }
    })
    .as_ref()
}

/// How token vectors become one text vector.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pooling {
    Mean,
    Cls,
    Max,
}

/// Text prepended before embedding, per purpose (empty: none).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Prompts {
    pub query: String,
    pub document: String,
}

/// Settings of the local provider besides its folder.
#[derive(Debug, Clone, Default)]
pub struct LocalOptions {
    /// `memory.search.local.queryPrompt`: the query prompt, literally (wins over the model's prompts).
    pub query_prompt: Option<String>,
    /// `memory.search.local.documentPrompt`.
    pub document_prompt: Option<String>,
    /// `memory.search.queryInputType` (or `inputType`): the name of one of the model's prompts for queries.
    pub query_prompt_name: Option<String>,
    /// `memory.search.documentInputType` (or `inputType`).
    pub document_prompt_name: Option<String>,
    /// `memory.search.outputDimensionality`: a Matryoshka cut of a model that has them (EmbeddingGemma: 512, 256,
    /// 128); `None` keeps the model's width.
    pub dimensions: Option<usize>,
}

/// Why a model folder cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum LocalModelError {
    #[error("model folder {} not found", .0.display())]
    MissingFolder(PathBuf),
    #[error("{file} missing in the model folder {}", .dir.display())]
    MissingFile { dir: PathBuf, file: &'static str },
    #[error("cannot read {}: {message}", .path.display())]
    Read { path: PathBuf, message: String },
    #[error("{}: {message}", .path.display())]
    Invalid { path: PathBuf, message: String },
    #[error("cannot load the model: {0}")]
    Model(String),
    #[error("tokenizer: {0}")]
    Tokenizer(String),
    /// A configured prompt name the model does not have; `key` is the config key that named it.
    #[error("the model in {} has no prompt named `{name}` (its prompts: {available})", .dir.display())]
    UnknownPrompt { key: &'static str, dir: PathBuf, name: String, available: String },
}

impl From<LocalModelError> for EmbeddingError {
    fn from(e: LocalModelError) -> Self {
        match e {
            LocalModelError::MissingFolder(_) | LocalModelError::MissingFile { .. } => {
                EmbeddingError::NotConfigured { provider: PROVIDER.into(), message: e.to_string() }
            }
            other => EmbeddingError::Permanent { provider: PROVIDER.into(), message: other.to_string() },
        }
    }
}

/// What is known about a model folder without loading the weights.
#[derive(Debug, Clone)]
pub struct LocalModelInfo {
    pub dir: PathBuf,
    pub name: String,
    pub config: BertConfig,
    pub max_seq_length: usize,
    pub pooling: Pooling,
    pub prompts: Prompts,
    pub fingerprint: String,
    /// The safetensors header and where the data starts.
    header: Arc<Value>,
    data_start: u64,
}

/// Why a local embedding model is not there when the thread loading it died.
fn load_task_lost(message: String) -> EmbeddingError {
    EmbeddingError::Permanent { provider: PROVIDER.into(), message }
}

/// Whether `dir` looks like a usable model folder (the files `auto` selection checks for).
pub fn model_folder_present(dir: &Path) -> bool {
    dir.join("model.safetensors").is_file() && dir.join("tokenizer.json").is_file()
}

struct Loaded {
    model: BertModel,
    tokenizer: Tokenizer,
    pad_id: u32,
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
    loaded: load_once::LoadOnce<Loaded>,
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

fn read_json(path: &Path) -> Result<Option<Value>, LocalModelError> {
    if !path.is_file() {
        return Ok(None);
    }
    let text = fs::read_to_string(path).map_err(|e| LocalModelError::Read { path: path.into(), message: e.to_string() })?;
    serde_json::from_str(&text).map(Some).map_err(|e| LocalModelError::Invalid { path: path.into(), message: format!("invalid JSON: {e}") })
}

/// The safetensors header (tensor names, dtypes, shapes, offsets) and the raw header bytes.
fn safetensors_header(path: &Path) -> Result<(Value, Vec<u8>, u64, u64), LocalModelError> {
    let err = |message: String| LocalModelError::Invalid { path: path.into(), message };
    let mut f = fs::File::open(path).map_err(|e| LocalModelError::Read { path: path.into(), message: e.to_string() })?;
    let size = f.metadata().map(|m| m.len()).unwrap_or(0);
    let mut len = [0u8; 8];
    f.read_exact(&mut len).map_err(|e| err(format!("not a safetensors file: {e}")))?;
    let n = u64::from_le_bytes(len);
    if n == 0 || n > 100 * 1024 * 1024 || n + 8 > size {
        return Err(err("not a safetensors file (bad header length)".into()));
    }
    let mut header = vec![0u8; n as usize];
    f.read_exact(&mut header).map_err(|e| err(format!("truncated header: {e}")))?;
    let v: Value = serde_json::from_slice(&header).map_err(|e| err(format!("bad header: {e}")))?;
    // A sample of the weights themselves, so a fine-tune with identical shapes gets another fingerprint.
    let mut sample = vec![0u8; (1 << 20).min((size - 8 - n) as usize)];
    f.read_exact(&mut sample).map_err(|e| err(format!("truncated data: {e}")))?;
    if size > 8 + n + (2 << 20) {
        let mut tail = vec![0u8; 1 << 20];
        f.seek(SeekFrom::End(-(1 << 20))).map_err(|e| err(e.to_string()))?;
        f.read_exact(&mut tail).map_err(|e| err(e.to_string()))?;
        sample.extend_from_slice(&tail);
    }
    let mut digest_input = header;
    digest_input.extend_from_slice(&sample);
    Ok((v, digest_input, size, 8 + n))
}

fn shape_of(header: &Value, name: &str) -> Option<Vec<usize>> {
    let entry = tensor_entry(header, name)?.1;
    entry.get("shape")?.as_array()?.iter().map(|d| d.as_u64().map(|d| d as usize)).collect()
}

/// A tensor's header entry, with or without the architecture's prefix: `(full name, entry)`.
fn tensor_entry<'a>(header: &'a Value, name: &str) -> Option<(String, &'a Value)> {
    ["", "bert.", "roberta.", "mpnet."].into_iter().find_map(|p| {
        let full = format!("{p}{name}");
        header.get(&full).map(|e| (full, e))
    })
}

fn safetensors_dtype(name: &str) -> Option<DType> {
    match name {
        "F32" => Some(DType::F32),
        "F16" => Some(DType::F16),
        "BF16" => Some(DType::BF16),
        "F64" => Some(DType::F64),
        _ => None,
    }
}

/// Architecture from `config.json` where it is a BERT config, else from the weights' shapes.
fn resolve_config(dir: &Path, config_json: Option<&Value>, header: &Value) -> Result<BertConfig, LocalModelError> {
    let st = dir.join("model.safetensors");
    let invalid = |message: String| LocalModelError::Invalid { path: st.clone(), message };
    let word = shape_of(header, "embeddings.word_embeddings.weight")
        .ok_or_else(|| invalid("no `embeddings.word_embeddings.weight`: not a BERT or MPNet checkpoint".into()))?;
    // MPNet: a relative-position bias and other attention names (config.json says `model_type: mpnet`).
    let relative = shape_of(header, "encoder.relative_attention_bias.weight");
    let model_type = config_json.and_then(|c| c.get("model_type")).and_then(Value::as_str).unwrap_or("");
    let roberta_names = header.get("roberta.embeddings.word_embeddings.weight").is_some();
    let architecture = if relative.is_some() {
        Architecture::MpNet
    } else if roberta_names || matches!(model_type, "xlm-roberta" | "roberta" | "camembert" | "xlm_roberta") {
        Architecture::XlmRoberta
    } else {
        Architecture::Bert
    };
    let query_weight = match architecture {
        Architecture::Bert | Architecture::XlmRoberta => "attention.self.query.weight",
        Architecture::MpNet => "attention.attn.q.weight",
    };
    let pos =
        shape_of(header, "embeddings.position_embeddings.weight").ok_or_else(|| invalid("no `embeddings.position_embeddings.weight`".into()))?;
    let types = shape_of(header, "embeddings.token_type_embeddings.weight").unwrap_or(vec![2, 0]);
    let inter = shape_of(header, "encoder.layer.0.intermediate.dense.weight")
        .ok_or_else(|| invalid("no `encoder.layer.0.intermediate.dense.weight`".into()))?;
    let mut layers = 0;
    while shape_of(header, &format!("encoder.layer.{layers}.{query_weight}")).is_some() {
        layers += 1;
    }
    let (vocab, hidden) = match word.as_slice() {
        [v, h] => (*v, *h),
        _ => return Err(invalid("word embeddings are not 2-dimensional".into())),
    };
    let bert = config_json.filter(|c| c.get("hidden_size").is_some());
    let get = |key: &str| bert.and_then(|c| c.get(key)).and_then(Value::as_u64).map(|v| v as usize);
    let heads = match get("num_attention_heads") {
        Some(h) => h,
        None => {
            // Small BERTs (MiniLM, bge-small, e5-small: 384 wide) use 12 heads of 32; larger ones heads of 64.
            let h = if hidden <= 384 && hidden % 12 == 0 { 12 } else { (hidden / 64).max(1) };
            warn!(dir = %dir.display(), heads = h, "config.json is not a BERT config; architecture read from the weights");
            h
        }
    };
    let cfg = BertConfig {
        architecture,
        relative_attention_num_buckets: relative.as_ref().and_then(|s| s.first().copied()).unwrap_or(32),
        vocab_size: vocab,
        hidden_size: hidden,
        num_hidden_layers: get("num_hidden_layers").unwrap_or(layers),
        num_attention_heads: heads,
        intermediate_size: inter.first().copied().unwrap_or(4 * hidden),
        max_position_embeddings: pos.first().copied().unwrap_or(512),
        type_vocab_size: types.first().copied().unwrap_or(2),
        layer_norm_eps: bert.and_then(|c| c.get("layer_norm_eps")).and_then(Value::as_f64).unwrap_or(match architecture {
            Architecture::Bert => 1e-12,
            Architecture::XlmRoberta | Architecture::MpNet => 1e-5,
        }),
        hidden_act: bert.and_then(|c| c.get("hidden_act")).and_then(Value::as_str).unwrap_or("gelu").to_string(),
        // RoBERTa-style positions start after the padding index (1 in every XLM-R and MPNet checkpoint).
        position_offset: match architecture {
            Architecture::Bert => 0,
            Architecture::XlmRoberta | Architecture::MpNet => get("pad_token_id").unwrap_or(1) + 1,
        },
    };
    if cfg.num_hidden_layers == 0 || cfg.num_hidden_layers > layers {
        return Err(invalid(format!("{} layers configured, {layers} in the weights", cfg.num_hidden_layers)));
    }
    if let Some(h) = get("hidden_size") {
        if h != hidden {
            return Err(invalid(format!("config.json says hidden_size {h}, the weights have {hidden}")));
        }
    }
    Ok(cfg)
}

/// Pooling from the sentence-transformers files: `modules.json` (the Pooling module's folder; modules this
/// provider cannot run are refused), else `1_Pooling/config.json`, else pooling keys in `config.json`; mean
/// when nothing says otherwise.
fn resolve_pooling(dir: &Path, config_json: Option<&Value>) -> Result<Pooling, LocalModelError> {
    let modules_path = dir.join("modules.json");
    let mut pooling_dir = dir.join("1_Pooling");
    if let Some(modules) = read_json(&modules_path)? {
        let invalid = |message: String| LocalModelError::Invalid { path: modules_path.clone(), message };
        let list = modules.as_array().ok_or_else(|| invalid("expected a list of modules".into()))?;
        for m in list {
            let ty = m.get("type").and_then(Value::as_str).unwrap_or("");
            let kind = ty.rsplit('.').next().unwrap_or(ty);
            match kind {
                "Transformer" | "Normalize" => {}
                "Pooling" => {
                    if let Some(p) = m.get("path").and_then(Value::as_str) {
                        // A path inside the folder only.
                        if p.is_empty() || Path::new(p).components().any(|c| !matches!(c, std::path::Component::Normal(_))) {
                            return Err(invalid(format!("Pooling module path `{p}` is not a folder inside the model folder")));
                        }
                        pooling_dir = dir.join(p);
                    }
                }
                other => {
                    return Err(invalid(format!(
                        "module `{}` ({other}) is not supported by the local provider (it runs Transformer, Pooling and Normalize)",
                        if ty.is_empty() { "?" } else { ty }
                    )))
                }
            }
        }
    }
    let pooling_path = pooling_dir.join("config.json");
    let pooling_cfg = match read_json(&pooling_path)? {
        Some(v) => Some(v),
        None => config_json.filter(|c| c.get("pooling_mode_mean_tokens").is_some()).cloned(),
    };
    let Some(cfg) = pooling_cfg else { return Ok(Pooling::Mean) };
    let flag = |k: &str| cfg.get(k).and_then(Value::as_bool).unwrap_or(false);
    // sqrt-length mean is the mean times a per-text constant: the same direction, so the same unit vector.
    let modes = [
        ("pooling_mode_cls_token", Some(Pooling::Cls)),
        ("pooling_mode_mean_tokens", Some(Pooling::Mean)),
        ("pooling_mode_mean_sqrt_len_tokens", Some(Pooling::Mean)),
        ("pooling_mode_max_tokens", Some(Pooling::Max)),
        ("pooling_mode_weightedmean_tokens", None),
        ("pooling_mode_lasttoken", None),
    ];
    let on: Vec<(&str, Option<Pooling>)> = modes.iter().copied().filter(|(k, _)| flag(k)).collect();
    match on.as_slice() {
        [] => Ok(Pooling::Mean),
        [(_, Some(p))] => Ok(*p),
        [(k, None)] => Err(LocalModelError::Invalid { path: pooling_path, message: format!("`{k}` is not supported by the local provider") }),
        // Several modes: sentence-transformers concatenates them; a legacy file may set mean and cls together,
        // which has always meant mean here.
        many if many.iter().all(|(_, p)| matches!(p, Some(Pooling::Mean) | Some(Pooling::Cls))) => Ok(Pooling::Mean),
        many => Err(LocalModelError::Invalid {
            path: pooling_path,
            message: format!("several pooling modes at once ({}) are not supported", many.iter().map(|(k, _)| *k).collect::<Vec<_>>().join(", ")),
        }),
    }
}

/// Whether a folder name reads like an E5 model (`multilingual-e5-small`, `e5-base-v2`...).
fn looks_like_e5(name: &str) -> bool {
    name.to_ascii_lowercase().split(|c: char| !c.is_ascii_alphanumeric()).any(|w| w == "e5")
}

/// Query and document prompts: the config's literal prompts, else the model's prompts chosen by name
/// (`queryInputType` / `documentInputType`), else the model's `query` / `document` (or `passage`) prompts, else
/// E5's for a folder named like an E5 model.
fn resolve_prompts(dir: &Path, name: &str, options: &LocalOptions) -> Result<Prompts, LocalModelError> {
    let path = dir.join("config_sentence_transformers.json");
    let mut available: Vec<(String, String)> = Vec::new();
    if let Some(v) = read_json(&path)? {
        if let Some(p) = v.get("prompts").filter(|p| !p.is_null()) {
            let obj = p.as_object().ok_or_else(|| LocalModelError::Invalid { path: path.clone(), message: "`prompts` is not an object".into() })?;
            for (k, v) in obj {
                let text =
                    v.as_str().ok_or_else(|| LocalModelError::Invalid { path: path.clone(), message: format!("prompt `{k}` is not a string") })?;
                available.push((k.clone(), text.to_string()));
            }
        }
    }
    let find = |n: &str| available.iter().find(|(k, _)| k == n).map(|(_, v)| v.clone());
    let named = |key: &'static str, n: &str| {
        find(n).ok_or_else(|| LocalModelError::UnknownPrompt {
            key,
            dir: dir.into(),
            name: n.into(),
            available: if available.is_empty() {
                "none".into()
            } else {
                available.iter().map(|(k, _)| format!("`{k}`")).collect::<Vec<_>>().join(", ")
            },
        })
    };
    let from_file = !available.is_empty();
    let e5 = !from_file && looks_like_e5(name);
    let pick = |literal: &Option<String>, wanted: &Option<String>, key: &'static str, defaults: &[&str], e5_default: &str| {
        if let Some(p) = literal {
            return Ok(p.clone());
        }
        let default = || defaults.iter().find_map(|d| find(d)).unwrap_or_else(|| if e5 { e5_default.into() } else { String::new() });
        match wanted {
            Some(n) if from_file => named(key, n),
            Some(n) => {
                // A model without prompts: the input-type keys (also read by remote providers) have nothing to
                // choose from here.
                warn!(key, value = %n, dir = %dir.display(), "the local model has no named prompts: the input type is not used");
                Ok(default())
            }
            None => Ok(default()),
        }
    };
    let query = pick(&options.query_prompt, &options.query_prompt_name, "memory.search.queryInputType", &["query"], "query: ")?;
    let document = pick(
        &options.document_prompt,
        &options.document_prompt_name,
        "memory.search.documentInputType",
        &["document", "passage", "doc", "corpus"],
        "passage: ",
    )?;
    if e5 && (options.query_prompt.is_none() || options.document_prompt.is_none()) {
        info!(dir = %dir.display(), "no prompts in the model folder; E5 prompts \"query: \" / \"passage: \" used (folder named like an E5 model; memory.search.local.queryPrompt / documentPrompt override)");
    }
    Ok(Prompts { query, document })
}

impl LocalModelInfo {
    /// Read a model folder's small files and the weights' header: no weights loaded.
    pub fn inspect(dir: &Path) -> Result<Self, LocalModelError> {
        Self::inspect_with(dir, &LocalOptions::default())
    }

    /// [`inspect`](Self::inspect) with the provider's settings (prompts).
    pub fn inspect_with(dir: &Path, options: &LocalOptions) -> Result<Self, LocalModelError> {
        if !dir.is_dir() {
            return Err(LocalModelError::MissingFolder(dir.into()));
        }
        for file in ["model.safetensors", "tokenizer.json"] {
            if !dir.join(file).is_file() {
                return Err(LocalModelError::MissingFile { dir: dir.into(), file });
            }
        }
        let config_json = read_json(&dir.join("config.json"))?;
        let (header, header_digest, size, data_start) = safetensors_header(&dir.join("model.safetensors"))?;
        let config = resolve_config(dir, config_json.as_ref(), &header)?;
        let pooling = resolve_pooling(dir, config_json.as_ref())?;
        let st_max =
            read_json(&dir.join("sentence_bert_config.json"))?.and_then(|v| v.get("max_seq_length").and_then(Value::as_u64)).map(|v| v as usize);
        // RoBERTa-style positions start after the padding index: 514 position embeddings hold 512 tokens.
        let usable_positions = config.max_position_embeddings.saturating_sub(config.position_offset);
        let max_seq_length = st_max.unwrap_or(usable_positions).min(usable_positions).min(512);
        let tokenizer_bytes =
            fs::read(dir.join("tokenizer.json")).map_err(|e| LocalModelError::Read { path: dir.join("tokenizer.json"), message: e.to_string() })?;
        let name = dir.file_name().map(|n| n.to_string_lossy().to_string()).unwrap_or_else(|| "local-model".into());
        let prompts = resolve_prompts(dir, &name, options)?;
        // The resolved architecture rather than config.json's bytes, so repairing a folder's config does not
        // change the identity of vectors that do not change.
        let fp_input = format!(
            "v1;provider=local;{}hidden={};layers={};heads={};inter={};eps={};act={};max_len={};pooling={:?};normalized=true;tokenizer={};weights={}:{}{}",
            // Empty for BERT, so the fingerprints of existing BERT indexes do not change.
            match config.architecture {
                Architecture::Bert => String::new(),
                Architecture::MpNet => "arch=mpnet;".into(),
                Architecture::XlmRoberta => format!("arch=xlmr;pos={};", config.position_offset),
            },
            config.hidden_size,
            config.num_hidden_layers,
            config.num_attention_heads,
            config.intermediate_size,
            config.layer_norm_eps,
            config.hidden_act,
            max_seq_length,
            pooling,
            memory_core::sha256_hex(&tokenizer_bytes),
            size,
            memory_core::sha256_hex(&header_digest),
            // Empty without prompts (existing indexes keep their identity).
            if prompts == Prompts::default() { String::new() } else { format!(";prompts={:?}/{:?}", prompts.query, prompts.document) },
        );
        Ok(LocalModelInfo {
            dir: dir.into(),
            name,
            config,
            max_seq_length,
            pooling,
            prompts,
            fingerprint: memory_core::sha256_hex(fp_input.as_bytes()),
            header: Arc::new(header),
            data_start,
        })
    }
}

/// A model file's weights: float tensors by name, and the int8 dense weights (`X.weight` stored `I8` beside its
/// `X.weight_scale`) by name where this CPU runs the int8 kernel (elsewhere they are dequantised into `floats`).
pub(crate) struct Weights {
    pub floats: HashMap<String, Tensor>,
    pub int8: HashMap<String, int8::Int8Weight>,
}

impl Weights {
    /// The float tensor `name`, dequantising an int8 one (layers the int8 kernel does not run, e.g. a classifier).
    pub fn take_float(&mut self, name: &str) -> Option<candle_core::Result<Tensor>> {
        if let Some(t) = self.floats.remove(name) {
            return Some(Ok(t));
        }
        self.int8.remove(name).map(|w| Tensor::from_vec(w.dequantize(), (w.out, w.inp), &Device::Cpu))
    }
}

/// Every tensor of the file but the word embeddings (read by positioned reads, only those bytes), and the word
/// embeddings as rows to read on demand.
fn read_weights(info: &LocalModelInfo, path: &Path) -> Result<(Weights, WordRows), LocalModelError> {
    let invalid = |message: String| LocalModelError::Invalid { path: path.into(), message };
    let file = fs::File::open(path).map_err(|e| LocalModelError::Read { path: path.into(), message: e.to_string() })?;
    let size = file.metadata().map(|m| m.len()).unwrap_or(0);
    let (word_name, word_entry) =
        tensor_entry(&info.header, "embeddings.word_embeddings.weight").ok_or_else(|| invalid("no `embeddings.word_embeddings.weight`".into()))?;
    // (dtype, or None for I8; shape; file offset; byte length)
    let span = |name: &str, e: &Value| -> Result<(Option<DType>, Vec<usize>, u64, u64), LocalModelError> {
        let bad = |what: &str| invalid(format!("tensor `{name}`: {what}"));
        let dtype_name = e.get("dtype").and_then(Value::as_str).ok_or_else(|| bad("no dtype"))?;
        let dtype = match dtype_name {
            "I8" => None,
            other => Some(safetensors_dtype(other).ok_or_else(|| bad(&format!("dtype {other} is not a float type")))?),
        };
        let shape: Vec<usize> = e
            .get("shape")
            .and_then(Value::as_array)
            .and_then(|a| a.iter().map(|d| d.as_u64().map(|d| d as usize)).collect())
            .ok_or_else(|| bad("bad shape"))?;
        let offs = e.get("data_offsets").and_then(Value::as_array).ok_or_else(|| bad("no data_offsets"))?;
        let (start, end) = match offs.as_slice() {
            [a, b] => (a.as_u64().ok_or_else(|| bad("bad data_offsets"))?, b.as_u64().ok_or_else(|| bad("bad data_offsets"))?),
            _ => return Err(bad("bad data_offsets")),
        };
        let elems = shape.iter().try_fold(1usize, |acc, d| acc.checked_mul(*d)).ok_or_else(|| bad("shape too large"))?;
        let width = dtype.map_or(1, |d| d.size_in_bytes()) as u64;
        let expected = (elems as u64).checked_mul(width).ok_or_else(|| bad("shape too large"))?;
        if end < start || end - start != expected || info.data_start + end > size {
            return Err(bad("data offsets do not match the shape or the file size"));
        }
        Ok((dtype, shape, info.data_start + start, end - start))
    };
    let (wdtype, wshape, wstart, _) = span(&word_name, word_entry)?;
    let wdtype = wdtype.ok_or_else(|| invalid("int8 word embeddings are not supported".into()))?;
    let words = match wshape.as_slice() {
        [rows, hidden] => WordRows::new(
            file.try_clone().map_err(|e| LocalModelError::Read { path: path.into(), message: e.to_string() })?,
            wstart,
            wdtype,
            *rows,
            *hidden,
        ),
        _ => return Err(invalid("word embeddings are not 2-dimensional".into())),
    };
    let mut floats = HashMap::new();
    let mut int8 = HashMap::new();
    let entries = info.header.as_object().ok_or_else(|| invalid("bad header".into()))?;
    // Every tensor is read into this one buffer and copied (or packed) from there.
    let mut buf = Vec::new();
    fn read<'b>(file: &fs::File, path: &Path, buf: &'b mut Vec<u8>, start: u64, len: u64) -> Result<&'b [u8], LocalModelError> {
        buf.resize(len as usize, 0);
        read_exact_at(file, buf, start).map_err(|e| LocalModelError::Read { path: path.into(), message: e.to_string() })?;
        Ok(buf)
    }
    let is_int8 = |name: &str| entries.get(name).and_then(|e| e.get("dtype")).and_then(Value::as_str) == Some("I8");
    let run_int8 = int8::enabled();
    for (name, e) in entries {
        if name == "__metadata__" || *name == word_name {
            continue;
        }
        // An int8 weight's scale is read with the weight.
        if name.strip_suffix("_scale").is_some_and(is_int8) {
            continue;
        }
        let dtype_name = e.get("dtype").and_then(Value::as_str);
        if dtype_name == Some("I8") {
            let (_, shape, start, len) = span(name, e)?;
            let [out, inp] = shape[..] else { return Err(invalid(format!("int8 tensor `{name}` is not 2-dimensional"))) };
            let scale_name = format!("{name}_scale");
            let scale_entry = entries.get(&scale_name).ok_or_else(|| invalid(format!("int8 tensor `{name}` has no `{scale_name}`")))?;
            let (sdtype, sshape, sstart, slen) = span(&scale_name, scale_entry)?;
            if sdtype != Some(DType::F32) || sshape != [out] {
                return Err(invalid(format!("`{scale_name}` must be F32 [{out}], one scale per output")));
            }
            let scale: Vec<f32> =
                read(&file, path, &mut buf, sstart, slen)?.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect();
            let q = as_i8(read(&file, path, &mut buf, start, len)?);
            if run_int8 {
                // Packed straight from the buffer: the weights are held once.
                int8.insert(name.clone(), int8::Int8Weight::new(out, inp, q, scale));
            } else {
                let t = Tensor::from_vec(int8::dequantize_rows(q, &scale), (out, inp), &Device::Cpu)
                    .map_err(|e| LocalModelError::Model(format!("tensor `{name}`: {e}")))?;
                floats.insert(name.clone(), t);
            }
            continue;
        }
        // Integer buffers (`position_ids`) are not weights.
        if dtype_name.and_then(safetensors_dtype).is_none() {
            debug!(tensor = %name, "skipped (not a float tensor)");
            continue;
        }
        let (Some(dtype), shape, start, len) = span(name, e)? else { unreachable!("a float dtype was checked above") };
        let t = Tensor::from_raw_buffer(read(&file, path, &mut buf, start, len)?, dtype, &shape, &Device::Cpu)
            .and_then(|t| t.to_dtype(DType::F32))
            .map_err(|e| LocalModelError::Model(format!("tensor `{name}`: {e}")))?;
        floats.insert(name.clone(), t);
    }
    Ok((Weights { floats, int8 }, words))
}

/// Bytes as the int8 values they store.
fn as_i8(b: &[u8]) -> &[i8] {
    // SAFETY: u8 and i8 have the same size and alignment and every bit pattern is valid for both.
    unsafe { std::slice::from_raw_parts(b.as_ptr() as *const i8, b.len()) }
}

#[cfg(unix)]
fn read_exact_at(file: &fs::File, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
    std::os::unix::fs::FileExt::read_exact_at(file, buf, offset)
}

#[cfg(not(unix))]
fn read_exact_at(file: &fs::File, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
    let mut f = file;
    f.seek(SeekFrom::Start(offset))?;
    f.read_exact(buf)
}

/// The last hidden state of `encodings[group]` in one forward pass, each padded on the right to the longest of
/// them, and the attention mask that hides the padding: `(batch, seq, hidden)` and `(batch, seq)`.
fn forward_padded(model: &BertModel, encodings: &[tokenizers::Encoding], group: &[usize], pad_id: u32) -> candle_core::Result<(Tensor, Tensor)> {
    let seq = group.iter().map(|i| encodings[*i].get_ids().len()).max().unwrap_or(1).max(1);
    let (mut ids, mut types, mut mask) = (Vec::new(), Vec::new(), Vec::new());
    for i in group {
        let e = &encodings[*i];
        let pad = seq - e.get_ids().len();
        ids.extend(e.get_ids().iter().copied().chain(std::iter::repeat_n(pad_id, pad)));
        types.extend(e.get_type_ids().iter().copied().chain(std::iter::repeat_n(0, pad)));
        mask.extend(std::iter::repeat_n(1u32, e.get_ids().len()).chain(std::iter::repeat_n(0, pad)));
    }
    let (n, dev) = (group.len(), model.device());
    let ids = Tensor::from_vec(ids, (n, seq), dev)?;
    let types = Tensor::from_vec(types, (n, seq), dev)?;
    let mask = Tensor::from_vec(mask, (n, seq), dev)?;
    Ok((model.forward(&ids, &types, &mask)?, mask))
}

impl Loaded {
    fn load(info: &LocalModelInfo) -> Result<Self, LocalModelError> {
        let started = std::time::Instant::now();
        let path = info.dir.join("model.safetensors");
        // The tokenizer (a JSON parse) and the weights (reads and copies) load side by side.
        let (tokenizer, weights) = std::thread::scope(|scope| {
            let tokenizer = scope.spawn(|| Self::load_tokenizer(info));
            let weights = read_weights(info, &path);
            let tokenizer = tokenizer.join().unwrap_or_else(|_| Err(LocalModelError::Tokenizer("tokenizer loading panicked".into())));
            (tokenizer, weights)
        });
        let (tokenizer, pad_id) = tokenizer?;
        let (mut weights, words) = weights?;
        let vb = VarBuilder::from_tensors(std::mem::take(&mut weights.floats), DType::F32, &Device::Cpu);
        let model = BertModel::load(vb, &info.config, Some(words), &mut weights.int8).map_err(|e| LocalModelError::Model(e.to_string()))?;
        info!(
            dir = %info.dir.display(),
            dims = info.config.hidden_size,
            layers = info.config.num_hidden_layers,
            max_seq_length = info.max_seq_length,
            ms = started.elapsed().as_millis() as u64,
            "local embedding model loaded"
        );
        Ok(Loaded { model, tokenizer, pad_id })
    }

    /// The tokenizer with the file's fixed padding (128 for MiniLM) and truncation replaced: no padding here (each
    /// forward pass pads its texts to the longest of them, see `embed`), truncation at the model's
    /// max_seq_length. Also the padding id.
    fn load_tokenizer(info: &LocalModelInfo) -> Result<(Tokenizer, u32), LocalModelError> {
        let mut tokenizer = Tokenizer::from_file(info.dir.join("tokenizer.json")).map_err(|e| LocalModelError::Tokenizer(e.to_string()))?;
        let pad_id = tokenizer
            .get_padding()
            .map(|p| p.pad_id)
            .or_else(|| tokenizer.token_to_id("[PAD]"))
            .or_else(|| tokenizer.token_to_id("<pad>"))
            .unwrap_or(0);
        tokenizer.with_padding(None);
        tokenizer
            .with_truncation(Some(TruncationParams {
                max_length: info.max_seq_length,
                strategy: TruncationStrategy::LongestFirst,
                stride: 0,
                ..TruncationParams::default()
            }))
            .map_err(|e| LocalModelError::Tokenizer(e.to_string()))?;
        Ok((tokenizer, pad_id))
    }

    /// Embed texts, batching texts of similar length together. Blocking (CPU-bound).
    fn embed(&self, info: &LocalModelInfo, texts: &[String]) -> Result<Vec<Vec<f32>>, LocalModelError> {
        // Token counts first, to group texts of similar length (less padding).
        let encodings = self
            .tokenizer
            .encode_batch(texts.iter().map(|t| t.as_str()).collect::<Vec<_>>(), true)
            .map_err(|e| LocalModelError::Tokenizer(e.to_string()))?;
        let lengths: Vec<usize> = encodings.iter().map(|e| e.get_ids().len()).collect();
        if lengths.iter().sum::<usize>() <= ONE_THREAD_MAX_TOKENS {
            if let Some(pool) = one_thread_pool() {
                return pool.install(|| self.embed_encoded(info, &encodings, &lengths));
            }
        }
        self.embed_encoded(info, &encodings, &lengths)
    }

    /// [`embed`](Self::embed) of tokenized texts.
    fn embed_encoded(&self, info: &LocalModelInfo, encodings: &[tokenizers::Encoding], lengths: &[usize]) -> Result<Vec<Vec<f32>>, LocalModelError> {
        let model_err = |e: candle_core::Error| LocalModelError::Model(e.to_string());
        let mut order: Vec<usize> = (0..encodings.len()).collect();
        order.sort_by_key(|i| std::cmp::Reverse(lengths[*i]));
        let mut out: Vec<Vec<f32>> = vec![Vec::new(); encodings.len()];
        let mut start = 0;
        while start < order.len() {
            let longest = lengths[order[start]].max(1);
            let per_pass = (TOKENS_PER_PASS / longest).clamp(1, MAX_TEXTS_PER_PASS);
            let group: Vec<usize> = order[start..(start + per_pass).min(order.len())].to_vec();
            start += group.len();
            let (hidden, mask) = forward_padded(&self.model, encodings, &group, self.pad_id).map_err(model_err)?;
            let pooled = match info.pooling {
                Pooling::Mean => mean_pool(&hidden, &mask),
                Pooling::Cls => cls_pool(&hidden),
                Pooling::Max => max_pool(&hidden, &mask),
            }
            .map_err(model_err)?;
            let rows: Vec<Vec<f32>> = pooled.to_vec2().map_err(model_err)?;
            for (i, mut v) in group.into_iter().zip(rows) {
                sanitize_and_normalize(&mut v);
                out[i] = v;
            }
        }
        Ok(out)
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
                Ok(loaded.embed(&p.info, &p.prompted(texts, purpose))?)
            }
        }
    }
}

impl FolderProvider {
    async fn loaded(&self) -> Result<Arc<Loaded>, EmbeddingError> {
        let info = self.info.clone();
        self.loaded.get(move || Loaded::load(&info).map_err(EmbeddingError::from), load_task_lost).await
    }

    /// Blocking embed with the purpose's prompt.
    pub fn embed_blocking_as(&self, texts: &[String], purpose: EmbeddingPurpose) -> Result<Vec<Vec<f32>>, EmbeddingError> {
        let texts = self.prompted(texts, purpose);
        let loaded = self.loaded.get_blocking(|| Loaded::load(&self.info))?;
        Ok(loaded.embed(&self.info, &texts)?)
    }

    /// The texts with the purpose's prompt in front (as they are when the prompt is empty).
    fn prompted(&self, texts: &[String], purpose: EmbeddingPurpose) -> Vec<String> {
        let prompt = match purpose {
            EmbeddingPurpose::Query => &self.info.prompts.query,
            EmbeddingPurpose::Document => &self.info.prompts.document,
        };
        if prompt.is_empty() {
            texts.to_vec()
        } else {
            texts.iter().map(|t| format!("{prompt}{t}")).collect()
        }
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
        let _permit =
            self.gate.acquire().await.map_err(|_| EmbeddingError::Permanent { provider: PROVIDER.into(), message: "provider closed".into() })?;
        let info = self.info.clone();
        let texts = self.prompted(texts, purpose);
        let n = texts.len();
        let started = std::time::Instant::now();
        let vectors = tokio::task::spawn_blocking(move || loaded.embed(&info, &texts))
            .await
            .map_err(|e| EmbeddingError::Permanent { provider: PROVIDER.into(), message: format!("embedding task failed: {e}") })??;
        debug!(texts = n, ms = started.elapsed().as_millis() as u64, "local embedding done");
        if vectors.len() != n || vectors.iter().any(|v| v.len() != self.info.config.hidden_size) {
            return Err(EmbeddingError::Permanent { provider: PROVIDER.into(), message: "model produced a malformed batch".into() });
        }
        Ok(vectors)
    }
}
