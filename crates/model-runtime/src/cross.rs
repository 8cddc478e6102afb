//! A BERT cross-encoder (ms-marco-MiniLM-L-12-v2 and its kind: the encoder, its pooler and a one-logit classifier)
//! from a model folder: `model.safetensors`, `tokenizer.json`, `config.json`. Each (query, passage) pair is one
//! input, `[CLS] query [SEP] passage [SEP]`, truncated to [`MAX_PAIR_TOKENS`] (the passage gives way first): the
//! pooled `[CLS]` vector through the classifier is the pair's relevance logit.

use std::time::Instant;

use candle_core::{DType, Device, Module, Tensor};
use candle_nn::{Linear, VarBuilder};
use tokenizers::{Tokenizer, TruncationParams, TruncationStrategy};
use tracing::info;

use crate::bert::{cls_pool, BertModel};
use crate::encoder::{forward_padded, FolderEncoder};
use crate::safetensors::{read_weights, tensor_entry};
use crate::{FolderModelInfo, ModelError, ScoreError};

/// Tokens of one (query, passage) pair: the cost of a pair grows with it, and a snippet-sized passage fits.
pub const MAX_PAIR_TOKENS: usize = 192;
/// Pairs per forward pass: small enough that the deadline is checked often.
const PAIRS_PER_PASS: usize = 8;

/// A cross-encoder, loaded.
pub struct CrossEncoder {
    encoder: BertModel,
    pooler: Linear,
    classifier: Linear,
    tokenizer: Tokenizer,
    pad_id: u32,
}

impl CrossEncoder {
    /// Checks that a folder holds a cross-encoder (its pooler and classifier) from the weights' header alone.
    pub fn check(info: &FolderModelInfo) -> Result<(), ModelError> {
        let has = |name: &str| tensor_entry(&info.header, name).is_some();
        if !has("classifier.weight") || !has("pooler.dense.weight") {
            return Err(ModelError::Invalid {
                path: info.dir.join("model.safetensors"),
                message: "not a cross-encoder: no `classifier.weight` / `pooler.dense.weight` (an embedding model cannot rerank)".into(),
            });
        }
        Ok(())
    }

    /// Reads the weights and the tokenizer of the folder `info` describes. Blocking.
    pub fn load(info: &FolderModelInfo) -> Result<CrossEncoder, ModelError> {
        let started = Instant::now();
        let path = info.dir.join("model.safetensors");
        let (mut weights, words) = read_weights(info, &path)?;
        let h = info.config.hidden_size;
        let mut take = |name: &str| -> Result<Tensor, ModelError> {
            ["bert.", ""]
                .iter()
                .find_map(|p| weights.take_float(&format!("{p}{name}")))
                .ok_or_else(|| ModelError::Invalid { path: path.clone(), message: format!("no `{name}`") })?
                .map_err(|e| ModelError::Model(format!("`{name}`: {e}")))
        };
        let pooler = Linear::new(take("pooler.dense.weight")?, Some(take("pooler.dense.bias")?));
        let classifier_w = take("classifier.weight")?;
        if classifier_w.dims() != [1, h] {
            return Err(ModelError::Invalid {
                path,
                message: format!("classifier is {:?}, expected [1, {h}]: one relevance logit", classifier_w.dims()),
            });
        }
        let classifier = Linear::new(classifier_w, Some(take("classifier.bias")?));
        let vb = VarBuilder::from_tensors(std::mem::take(&mut weights.floats), DType::F32, &Device::Cpu);
        let encoder = BertModel::load(vb, &info.config, Some(words), &mut weights.int8).map_err(|e| ModelError::Model(e.to_string()))?;
        let (mut tokenizer, pad_id) = FolderEncoder::load_tokenizer(info)?;
        tokenizer
            .with_truncation(Some(TruncationParams {
                max_length: MAX_PAIR_TOKENS.min(info.max_seq_length),
                strategy: TruncationStrategy::OnlySecond,
                stride: 0,
                ..TruncationParams::default()
            }))
            .map_err(|e| ModelError::Tokenizer(e.to_string()))?;
        info!(dir = %info.dir.display(), layers = info.config.num_hidden_layers, ms = started.elapsed().as_millis() as u64, "local reranker loaded");
        Ok(CrossEncoder { encoder, pooler, classifier, tokenizer, pad_id })
    }

    /// Logits of (query, passage) pairs, `PAIRS_PER_PASS` a pass, longest first; over budget once `deadline`
    /// passes between passes. Blocking (CPU-bound).
    pub fn score(&self, query: &str, passages: &[String], deadline: Instant) -> Result<Vec<f32>, ScoreError> {
        let failed = ScoreError::Failed;
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
                return Err(ScoreError::OverBudget { budget_ms });
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
