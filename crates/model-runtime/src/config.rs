//! A model folder's configuration without its weights: the architecture (`config.json` when it is a BERT config,
//! else the weights' shapes), the longest input, the pooling and the prompts as the sentence-transformers files
//! declare them, and an identity (fingerprint) of all that and a sample of the weights.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::Value;
use tracing::{info, warn};

use crate::bert::{Architecture, BertConfig};
use crate::safetensors::{safetensors_header, shape_of};
use crate::{sha256_hex, ModelError};

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

/// Settings of a model besides its file or folder, as the provider's configuration gives them.
#[derive(Debug, Clone, Default)]
pub struct ModelOptions {
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

/// What is known about a model folder without loading the weights.
#[derive(Debug, Clone)]
pub struct FolderModelInfo {
    pub dir: PathBuf,
    pub name: String,
    pub config: BertConfig,
    pub max_seq_length: usize,
    pub pooling: Pooling,
    pub prompts: Prompts,
    pub fingerprint: String,
    /// The safetensors header and where the data starts.
    pub(crate) header: Arc<Value>,
    pub(crate) data_start: u64,
}

fn read_json(path: &Path) -> Result<Option<Value>, ModelError> {
    if !path.is_file() {
        return Ok(None);
    }
    let text = fs::read_to_string(path).map_err(|e| ModelError::Read { path: path.into(), message: e.to_string() })?;
    serde_json::from_str(&text).map(Some).map_err(|e| ModelError::Invalid { path: path.into(), message: format!("invalid JSON: {e}") })
}

/// Architecture from `config.json` where it is a BERT config, else from the weights' shapes.
fn resolve_config(dir: &Path, config_json: Option<&Value>, header: &Value) -> Result<BertConfig, ModelError> {
    let st = dir.join("model.safetensors");
    let invalid = |message: String| ModelError::Invalid { path: st.clone(), message };
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
/// runtime cannot run are refused), else `1_Pooling/config.json`, else pooling keys in `config.json`; mean
/// when nothing says otherwise.
fn resolve_pooling(dir: &Path, config_json: Option<&Value>) -> Result<Pooling, ModelError> {
    let modules_path = dir.join("modules.json");
    let mut pooling_dir = dir.join("1_Pooling");
    if let Some(modules) = read_json(&modules_path)? {
        let invalid = |message: String| ModelError::Invalid { path: modules_path.clone(), message };
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
        [(k, None)] => Err(ModelError::Invalid { path: pooling_path, message: format!("`{k}` is not supported by the local provider") }),
        // Several modes: sentence-transformers concatenates them; a legacy file may set mean and cls together,
        // which has always meant mean here.
        many if many.iter().all(|(_, p)| matches!(p, Some(Pooling::Mean) | Some(Pooling::Cls))) => Ok(Pooling::Mean),
        many => Err(ModelError::Invalid {
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
fn resolve_prompts(dir: &Path, name: &str, options: &ModelOptions) -> Result<Prompts, ModelError> {
    let path = dir.join("config_sentence_transformers.json");
    let mut available: Vec<(String, String)> = Vec::new();
    if let Some(v) = read_json(&path)? {
        if let Some(p) = v.get("prompts").filter(|p| !p.is_null()) {
            let obj = p.as_object().ok_or_else(|| ModelError::Invalid { path: path.clone(), message: "`prompts` is not an object".into() })?;
            for (k, v) in obj {
                let text = v.as_str().ok_or_else(|| ModelError::Invalid { path: path.clone(), message: format!("prompt `{k}` is not a string") })?;
                available.push((k.clone(), text.to_string()));
            }
        }
    }
    let find = |n: &str| available.iter().find(|(k, _)| k == n).map(|(_, v)| v.clone());
    let named = |key: &'static str, n: &str| {
        find(n).ok_or_else(|| ModelError::UnknownPrompt {
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

impl FolderModelInfo {
    /// Whether the weights hold the tensor `name` (with or without the architecture's prefix), by the header alone.
    pub fn has_tensor(&self, name: &str) -> bool {
        crate::safetensors::tensor_entry(&self.header, name).is_some()
    }

    /// Read a model folder's small files and the weights' header: no weights loaded.
    pub fn inspect(dir: &Path) -> Result<Self, ModelError> {
        Self::inspect_with(dir, &ModelOptions::default())
    }

    /// [`inspect`](Self::inspect) with the provider's settings (prompts), as `local.*` and the input-type keys
    /// give them.
    pub fn inspect_with(dir: &Path, options: &ModelOptions) -> Result<Self, ModelError> {
        if !dir.is_dir() {
            return Err(ModelError::MissingFolder(dir.into()));
        }
        for file in ["model.safetensors", "tokenizer.json"] {
            if !dir.join(file).is_file() {
                return Err(ModelError::MissingFile { dir: dir.into(), file });
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
            fs::read(dir.join("tokenizer.json")).map_err(|e| ModelError::Read { path: dir.join("tokenizer.json"), message: e.to_string() })?;
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
            sha256_hex(&tokenizer_bytes),
            size,
            sha256_hex(&header_digest),
            // Empty without prompts (existing indexes keep their identity).
            if prompts == Prompts::default() { String::new() } else { format!(";prompts={:?}/{:?}", prompts.query, prompts.document) },
        );
        Ok(FolderModelInfo {
            dir: dir.into(),
            name,
            config,
            max_seq_length,
            pooling,
            prompts,
            fingerprint: sha256_hex(fp_input.as_bytes()),
            header: Arc::new(header),
            data_start,
        })
    }
}
