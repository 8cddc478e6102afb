//! A model folder's encoder, loaded: the BERT graph and the folder's tokenizer, embedding texts in forward passes
//! of texts of similar length, pooled as the folder says and L2-normalised.

use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use tokenizers::{Tokenizer, TruncationParams, TruncationStrategy};
use tracing::{info, warn};

use crate::bert::{cls_pool, max_pool, mean_pool, BertModel};
use crate::safetensors::read_weights;
use crate::{sanitize_and_normalize, FolderModelInfo, ModelError, Pooling};

/// Padded tokens per forward pass (batch x longest), bounding memory and keeping batches of similar length.
const TOKENS_PER_PASS: usize = 8192;
const MAX_TEXTS_PER_PASS: usize = 64;
/// Inputs of at most this many tokens in all (a search query) run on one thread: for matrices this small,
/// splitting each product over threads costs more than it saves while other work keeps the cores busy, and on a
/// quiet machine it makes no difference (docs/benchmark-history.md has the measurements).
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

/// A model folder's encoder and tokenizer, loaded.
pub struct FolderEncoder {
    model: BertModel,
    tokenizer: Tokenizer,
    pad_id: u32,
}

/// The last hidden state of `encodings[group]` in one forward pass, each padded on the right to the longest of
/// them, and the attention mask that hides the padding: `(batch, seq, hidden)` and `(batch, seq)`.
pub(crate) fn forward_padded(
    model: &BertModel,
    encodings: &[tokenizers::Encoding],
    group: &[usize],
    pad_id: u32,
) -> candle_core::Result<(Tensor, Tensor)> {
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

impl FolderEncoder {
    /// Reads the weights and the tokenizer of the folder `info` describes. Blocking.
    pub fn load(info: &FolderModelInfo) -> Result<Self, ModelError> {
        let started = std::time::Instant::now();
        let path = info.dir.join("model.safetensors");
        // The tokenizer (a JSON parse) and the weights (reads and copies) load side by side.
        let (tokenizer, weights) = std::thread::scope(|scope| {
            let tokenizer = scope.spawn(|| Self::load_tokenizer(info));
            let weights = read_weights(info, &path);
            let tokenizer = tokenizer.join().unwrap_or_else(|_| Err(ModelError::Tokenizer("tokenizer loading panicked".into())));
            (tokenizer, weights)
        });
        let (tokenizer, pad_id) = tokenizer?;
        let (mut weights, words) = weights?;
        let vb = VarBuilder::from_tensors(std::mem::take(&mut weights.floats), DType::F32, &Device::Cpu);
        let model = BertModel::load(vb, &info.config, Some(words), &mut weights.int8).map_err(|e| ModelError::Model(e.to_string()))?;
        info!(
            dir = %info.dir.display(),
            dims = info.config.hidden_size,
            layers = info.config.num_hidden_layers,
            max_seq_length = info.max_seq_length,
            ms = started.elapsed().as_millis() as u64,
            "local embedding model loaded"
        );
        Ok(FolderEncoder { model, tokenizer, pad_id })
    }

    /// The tokenizer with the file's fixed padding (128 for MiniLM) and truncation replaced: no padding here (each
    /// forward pass pads its texts to the longest of them, see `embed`), truncation at the model's
    /// max_seq_length. Also the padding id.
    pub(crate) fn load_tokenizer(info: &FolderModelInfo) -> Result<(Tokenizer, u32), ModelError> {
        let mut tokenizer = Tokenizer::from_file(info.dir.join("tokenizer.json")).map_err(|e| ModelError::Tokenizer(e.to_string()))?;
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
            .map_err(|e| ModelError::Tokenizer(e.to_string()))?;
        Ok((tokenizer, pad_id))
    }

    /// Embed texts, batching texts of similar length together. Blocking (CPU-bound).
    pub fn embed(&self, info: &FolderModelInfo, texts: &[String]) -> Result<Vec<Vec<f32>>, ModelError> {
        // Token counts first, to group texts of similar length (less padding).
        let encodings = self
            .tokenizer
            .encode_batch(texts.iter().map(std::string::String::as_str).collect::<Vec<_>>(), true)
            .map_err(|e| ModelError::Tokenizer(e.to_string()))?;
        let lengths: Vec<usize> = encodings.iter().map(|e| e.get_ids().len()).collect();
        if lengths.iter().sum::<usize>() <= ONE_THREAD_MAX_TOKENS {
            if let Some(pool) = one_thread_pool() {
                return pool.install(|| self.embed_encoded(info, &encodings, &lengths));
            }
        }
        self.embed_encoded(info, &encodings, &lengths)
    }

    /// [`embed`](Self::embed) of tokenized texts.
    fn embed_encoded(&self, info: &FolderModelInfo, encodings: &[tokenizers::Encoding], lengths: &[usize]) -> Result<Vec<Vec<f32>>, ModelError> {
        let model_err = |e: candle_core::Error| ModelError::Model(e.to_string());
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
