//! `local`: a sentence-embedding model run in-process from a folder on disk, pure Rust (candle + tokenizers),
//! no network. BERT-style checkpoints (all-MiniLM-L6-v2, bge-small, e5-small...) and MPNet ones
//! (all-mpnet-base-v2):
//!
//! - `model.safetensors` and `tokenizer.json` are required; `config.json` (the BERT config) is read when
//!   present. A folder whose `config.json` is a sentence-transformers pooling config (as when a model's
//!   `1_Pooling/config.json` was copied over it) still loads: the architecture is read from the weights' shapes.
//! - Padding and truncation fixed in `tokenizer.json` (MiniLM fixes padding at 128) are replaced: each batch is
//!   padded to its longest text, and texts are truncated at the model's `max_seq_length`
//!   (`sentence_bert_config.json`, else the position-embedding count, at most 512).
//! - Mean pooling over real tokens only (attention mask), or `[CLS]` when the pooling config says so; then L2
//!   normalisation.
//!
//! The model loads on the first `embed` (or [`LocalProvider::load`]); `from_config` only reads small files.

mod bert;

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

pub use bert::{Architecture, BertConfig};
use bert::{cls_pool, mean_pool, BertModel};

const PROVIDER: &str = "local";
/// Padded tokens per forward pass (batch x longest), bounding memory and keeping batches of similar length.
const TOKENS_PER_PASS: usize = 8192;
const MAX_TEXTS_PER_PASS: usize = 64;

/// How token vectors become one text vector.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pooling {
    Mean,
    Cls,
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
    pub fingerprint: String,
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

/// The `local` provider. Cheap to clone; the model is loaded once and shared.
#[derive(Clone)]
pub struct LocalProvider {
    info: Arc<LocalModelInfo>,
    loaded: Arc<tokio::sync::OnceCell<Arc<Loaded>>>,
    /// One forward pass at a time: candle already uses every core for one.
    gate: Arc<tokio::sync::Semaphore>,
}

impl fmt::Debug for LocalProvider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LocalProvider")
            .field("dir", &self.info.dir)
            .field("dims", &self.info.config.hidden_size)
            .field("max_seq_length", &self.info.max_seq_length)
            .field("pooling", &self.info.pooling)
            .field("loaded", &self.loaded.initialized())
            .finish()
    }
}

fn read_json(path: &Path) -> Result<Option<Value>, LocalModelError> {
    if !path.is_file() {
        return Ok(None);
    }
    let text = fs::read_to_string(path).map_err(|e| LocalModelError::Read { path: path.into(), message: e.to_string() })?;
    serde_json::from_str(&text)
        .map(Some)
        .map_err(|e| LocalModelError::Invalid { path: path.into(), message: format!("invalid JSON: {e}") })
}

/// The safetensors header (tensor names, dtypes, shapes, offsets) and the raw header bytes.
fn safetensors_header(path: &Path) -> Result<(Value, Vec<u8>, u64), LocalModelError> {
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
    Ok((v, digest_input, size))
}

fn shape_of(header: &Value, name: &str) -> Option<Vec<usize>> {
    let entry = header.get(name).or_else(|| header.get(format!("bert.{name}"))).or_else(|| header.get(format!("mpnet.{name}")))?;
    entry.get("shape")?.as_array()?.iter().map(|d| d.as_u64().map(|d| d as usize)).collect()
}

/// Architecture from `config.json` where it is a BERT config, else from the weights' shapes.
fn resolve_config(dir: &Path, config_json: Option<&Value>, header: &Value) -> Result<BertConfig, LocalModelError> {
    let st = dir.join("model.safetensors");
    let invalid = |message: String| LocalModelError::Invalid { path: st.clone(), message };
    let word = shape_of(header, "embeddings.word_embeddings.weight")
        .ok_or_else(|| invalid("no `embeddings.word_embeddings.weight`: not a BERT or MPNet checkpoint".into()))?;
    // MPNet: a relative-position bias and other attention names (config.json says `model_type: mpnet`).
    let relative = shape_of(header, "encoder.relative_attention_bias.weight");
    let architecture = if relative.is_some() { Architecture::MpNet } else { Architecture::Bert };
    let query_weight = match architecture {
        Architecture::Bert => "attention.self.query.weight",
        Architecture::MpNet => "attention.attn.q.weight",
    };
    let pos = shape_of(header, "embeddings.position_embeddings.weight")
        .ok_or_else(|| invalid("no `embeddings.position_embeddings.weight`".into()))?;
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
            Architecture::MpNet => 1e-5,
        }),
        hidden_act: bert.and_then(|c| c.get("hidden_act")).and_then(Value::as_str).unwrap_or("gelu").to_string(),
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

fn resolve_pooling(dir: &Path, config_json: Option<&Value>) -> Result<Pooling, LocalModelError> {
    let pooling_cfg = match read_json(&dir.join("1_Pooling").join("config.json"))? {
        Some(v) => Some(v),
        None => config_json.filter(|c| c.get("pooling_mode_mean_tokens").is_some()).cloned(),
    };
    let flag = |k: &str| pooling_cfg.as_ref().and_then(|c| c.get(k)).and_then(Value::as_bool).unwrap_or(false);
    Ok(if flag("pooling_mode_cls_token") && !flag("pooling_mode_mean_tokens") { Pooling::Cls } else { Pooling::Mean })
}

impl LocalModelInfo {
    /// Read a model folder's small files and the weights' header: no weights loaded.
    pub fn inspect(dir: &Path) -> Result<Self, LocalModelError> {
        if !dir.is_dir() {
            return Err(LocalModelError::MissingFolder(dir.into()));
        }
        for file in ["model.safetensors", "tokenizer.json"] {
            if !dir.join(file).is_file() {
                return Err(LocalModelError::MissingFile { dir: dir.into(), file });
            }
        }
        let config_json = read_json(&dir.join("config.json"))?;
        let (header, header_digest, size) = safetensors_header(&dir.join("model.safetensors"))?;
        let config = resolve_config(dir, config_json.as_ref(), &header)?;
        let pooling = resolve_pooling(dir, config_json.as_ref())?;
        let st_max = read_json(&dir.join("sentence_bert_config.json"))?
            .and_then(|v| v.get("max_seq_length").and_then(Value::as_u64))
            .map(|v| v as usize);
        // MPNet's first two positions are reserved (padding index 1): 514 position embeddings hold 512 tokens.
    let usable_positions = match config.architecture {
        Architecture::Bert => config.max_position_embeddings,
        Architecture::MpNet => config.max_position_embeddings.saturating_sub(2),
    };
    let max_seq_length = st_max.unwrap_or(usable_positions).min(usable_positions).min(512);
        let tokenizer_bytes = fs::read(dir.join("tokenizer.json"))
            .map_err(|e| LocalModelError::Read { path: dir.join("tokenizer.json"), message: e.to_string() })?;
        let name = dir
            .file_name()
            .map(|n| n.to_string_lossy().to_string())
            .unwrap_or_else(|| "local-model".into());
        // The resolved architecture rather than config.json's bytes, so repairing a folder's config does not
        // change the identity of vectors that do not change.
        let fp_input = format!(
            "v1;provider=local;{}hidden={};layers={};heads={};inter={};eps={};act={};max_len={};pooling={:?};normalized=true;tokenizer={};weights={}:{}",
            // Empty for BERT, so the fingerprints of existing BERT indexes do not change.
            if config.architecture == Architecture::MpNet { "arch=mpnet;" } else { "" },
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
        );
        Ok(LocalModelInfo {
            dir: dir.into(),
            name,
            config,
            max_seq_length,
            pooling,
            fingerprint: memory_core::sha256_hex(fp_input.as_bytes()),
        })
    }
}

impl Loaded {
    fn load(info: &LocalModelInfo) -> Result<Self, LocalModelError> {
        let started = std::time::Instant::now();
        let mut tokenizer =
            Tokenizer::from_file(info.dir.join("tokenizer.json")).map_err(|e| LocalModelError::Tokenizer(e.to_string()))?;
        // Replace the file's fixed padding (128 for MiniLM) and truncation: no padding here (each forward pass
        // pads its texts to the longest of them, see `embed`), truncation at the model's max_seq_length.
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
        let path = info.dir.join("model.safetensors");
        let data = fs::read(&path).map_err(|e| LocalModelError::Read { path: path.clone(), message: e.to_string() })?;
        let vb = VarBuilder::from_buffered_safetensors(data, DType::F32, &Device::Cpu)
            .map_err(|e| LocalModelError::Model(e.to_string()))?;
        let model = BertModel::load(vb, &info.config).map_err(|e| LocalModelError::Model(e.to_string()))?;
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

    /// Embed texts, batching texts of similar length together. Blocking (CPU-bound).
    fn embed(&self, info: &LocalModelInfo, texts: &[String]) -> Result<Vec<Vec<f32>>, LocalModelError> {
        let model_err = |e: candle_core::Error| LocalModelError::Model(e.to_string());
        // Token counts first, to group texts of similar length (less padding).
        let encodings = self
            .tokenizer
            .encode_batch(texts.iter().map(|t| t.as_str()).collect::<Vec<_>>(), true)
            .map_err(|e| LocalModelError::Tokenizer(e.to_string()))?;
        let lengths: Vec<usize> = encodings.iter().map(|e| e.get_ids().len()).collect();
        let mut order: Vec<usize> = (0..texts.len()).collect();
        order.sort_by_key(|i| std::cmp::Reverse(lengths[*i]));
        let mut out: Vec<Vec<f32>> = vec![Vec::new(); texts.len()];
        let mut start = 0;
        while start < order.len() {
            let longest = lengths[order[start]].max(1);
            let per_pass = (TOKENS_PER_PASS / longest).clamp(1, MAX_TEXTS_PER_PASS);
            let group: Vec<usize> = order[start..(start + per_pass).min(order.len())].to_vec();
            start += group.len();
            let seq = group.iter().map(|i| lengths[*i]).max().unwrap_or(1).max(1);
            let (mut ids, mut types, mut mask) = (Vec::new(), Vec::new(), Vec::new());
            for i in &group {
                let e = &encodings[*i];
                let pad = seq - e.get_ids().len();
                ids.extend(e.get_ids().iter().copied().chain(std::iter::repeat_n(self.pad_id, pad)));
                types.extend(e.get_type_ids().iter().copied().chain(std::iter::repeat_n(0, pad)));
                mask.extend(std::iter::repeat_n(1u32, e.get_ids().len()).chain(std::iter::repeat_n(0, pad)));
            }
            let n = group.len();
            let dev = self.model.device();
            let ids = Tensor::from_vec(ids, (n, seq), dev).map_err(model_err)?;
            let types = Tensor::from_vec(types, (n, seq), dev).map_err(model_err)?;
            let mask = Tensor::from_vec(mask, (n, seq), dev).map_err(model_err)?;
            let hidden = self.model.forward(&ids, &types, &mask).map_err(model_err)?;
            let pooled = match info.pooling {
                Pooling::Mean => mean_pool(&hidden, &mask),
                Pooling::Cls => cls_pool(&hidden),
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
    /// Inspect a model folder (cheap); the weights load on first use.
    pub fn open(dir: impl AsRef<Path>) -> Result<Self, LocalModelError> {
        let info = LocalModelInfo::inspect(dir.as_ref())?;
        debug!(dir = %info.dir.display(), fingerprint = %info.fingerprint, "local model folder inspected");
        Ok(LocalProvider {
            info: Arc::new(info),
            loaded: Arc::new(tokio::sync::OnceCell::new()),
            gate: Arc::new(tokio::sync::Semaphore::new(1)),
        })
    }

    pub fn info(&self) -> &LocalModelInfo {
        &self.info
    }

    /// Load the weights now (otherwise the first `embed` does).
    pub async fn load(&self) -> Result<(), EmbeddingError> {
        self.loaded().await.map(|_| ())
    }

    async fn loaded(&self) -> Result<Arc<Loaded>, EmbeddingError> {
        let info = self.info.clone();
        self.loaded
            .get_or_try_init(|| async move {
                tokio::task::spawn_blocking(move || Loaded::load(&info).map(Arc::new))
                    .await
                    .map_err(|e| EmbeddingError::Permanent { provider: PROVIDER.into(), message: format!("model load task failed: {e}") })?
                    .map_err(EmbeddingError::from)
            })
            .await
            .cloned()
    }

    /// Blocking embed, for callers outside an async runtime (benchmarks, tools).
    pub fn embed_blocking(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbeddingError> {
        let loaded = match self.loaded.get() {
            Some(l) => l.clone(),
            None => {
                let l = Arc::new(Loaded::load(&self.info)?);
                let _ = self.loaded.set(l.clone());
                l
            }
        };
        Ok(loaded.embed(&self.info, texts)?)
    }
}

#[async_trait]
impl EmbeddingProvider for LocalProvider {
    fn id(&self) -> &str {
        PROVIDER
    }

    fn model(&self) -> &str {
        &self.info.name
    }

    fn dimensions(&self) -> Option<usize> {
        Some(self.info.config.hidden_size)
    }

    fn fingerprint(&self) -> String {
        self.info.fingerprint.clone()
    }

    /// The same vectors for queries and documents (the model has no query/document distinction).
    async fn embed(&self, texts: &[String], _purpose: EmbeddingPurpose) -> Result<Vec<Vec<f32>>, EmbeddingError> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        let loaded = self.loaded().await?;
        let _permit = self.gate.acquire().await.map_err(|_| EmbeddingError::Permanent {
            provider: PROVIDER.into(),
            message: "provider closed".into(),
        })?;
        let info = self.info.clone();
        let texts = texts.to_vec();
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
