//! A BERT encoder (the architecture of all-MiniLM-L6-v2, bge-small, e5-small, multilingual-e5-small...), its
//! XLM-RoBERTa variant (paraphrase-multilingual-mpnet-base-v2, bge-m3, multilingual-e5-base/large) and its MPNet
//! variant (all-mpnet-base-v2) on candle, CPU, f32.
//!
//! Weights are read by their Hugging Face names, with or without the `bert.` / `roberta.` / `mpnet.` prefix.
//! Only the encoder is built (no pooler, no heads): the folder encoder pools the last hidden state itself
//! (`pool.rs`).
//! XLM-RoBERTa is BERT with positions counted from `pad_token_id + 1` (RoBERTa style) and one token type.
//! MPNet differs from BERT in three places: attention weights under other names, positions counted from 2
//! (RoBERTa style, no token types), and a learnt relative-position bias added to every layer's attention scores.
//!
//! The word-embedding table (most of a multilingual model: 250k x 384 floats for multilingual-e5-small) can stay
//! on disk: [`WordRows`] reads only the rows of the tokens a forward pass needs.

mod attention;
mod config;
mod layers;
mod pool;
#[cfg(test)]
mod tests;
mod weights;

use std::collections::HashMap;

use candle_core::{DType, Device, Module, Tensor};
use candle_nn::{Embedding, LayerNorm, VarBuilder};

use crate::int8::{Activation, Int8Weight};
use attention::{prefix_lengths, relative_buckets};
pub use config::{Architecture, BertConfig};
use layers::{plain_norm, Layer};
pub use pool::{cls_pool, max_pool, mean_pool};
pub use weights::WordRows;
use weights::{dense, layer_norm, Words};

pub struct BertModel {
    word: Words,
    position: Embedding,
    position_offset: u32,
    /// BERT only.
    token_type: Option<Embedding>,
    /// MPNet only: `(buckets, heads)`, shared by all layers.
    relative_bias: Option<Embedding>,
    relative_buckets: usize,
    emb_norm: LayerNorm,
    layers: Vec<Layer>,
    heads: usize,
    head_dim: usize,
    tanh_gelu: bool,
    device: Device,
    /// Whether int8 layers may run on plain buffers ([`plain`]); tests turn it off to compare with candle's path.
    plain_enabled: bool,
}

impl BertModel {
    /// The encoder from `vb`; the word embeddings from `words` when given, else from `vb`; each dense layer whose
    /// weight `int8` holds (by its full name) runs in int8 (those weights are taken out of `int8`).
    pub fn load(vb: VarBuilder, cfg: &BertConfig, words: Option<WordRows>, int8: &mut HashMap<String, Int8Weight>) -> candle_core::Result<Self> {
        let vb = ["bert", "roberta", "mpnet"]
            .into_iter()
            .find(|p| vb.contains_tensor(&format!("{p}.embeddings.position_embeddings.weight")))
            .map_or(vb.clone(), |p| vb.pp(p));
        let h = cfg.hidden_size;
        if cfg.num_attention_heads == 0 || !h.is_multiple_of(cfg.num_attention_heads) {
            candle_core::bail!("hidden size {h} is not a multiple of {} attention heads", cfg.num_attention_heads);
        }
        let mpnet = cfg.architecture == Architecture::MpNet;
        let e = vb.pp("embeddings");
        let word = match words {
            Some(rows) if rows.rows == cfg.vocab_size && rows.hidden == h => Words::Rows(rows),
            Some(rows) => candle_core::bail!("word embeddings are {}x{}, expected {}x{h}", rows.rows, rows.hidden, cfg.vocab_size),
            None => Words::Table(Embedding::new(e.get((cfg.vocab_size, h), "word_embeddings.weight")?, h)),
        };
        if cfg.position_offset >= cfg.max_position_embeddings {
            candle_core::bail!("position offset {} beyond {} positions", cfg.position_offset, cfg.max_position_embeddings);
        }
        let position = Embedding::new(e.get((cfg.max_position_embeddings, h), "position_embeddings.weight")?, h);
        let token_type = if mpnet { None } else { Some(Embedding::new(e.get((cfg.type_vocab_size, h), "token_type_embeddings.weight")?, h)) };
        let relative_bias = if mpnet {
            let w = vb.get((cfg.relative_attention_num_buckets, cfg.num_attention_heads), "encoder.relative_attention_bias.weight")?;
            Some(Embedding::new(w, cfg.num_attention_heads))
        } else {
            None
        };
        let emb_norm = layer_norm(&e, h, cfg.layer_norm_eps, "LayerNorm")?;
        let mut layers = Vec::with_capacity(cfg.num_hidden_layers);
        for i in 0..cfg.num_hidden_layers {
            let l = vb.pp(format!("encoder.layer.{i}"));
            let a = l.pp("attention");
            let (q, k, v, o, norm) = if mpnet {
                ("attn.q", "attn.k", "attn.v", "attn.o", "LayerNorm")
            } else {
                ("self.query", "self.key", "self.value", "output.dense", "output.LayerNorm")
            };
            let mut layer = Layer {
                query: dense(&a, h, h, q, int8)?,
                key: dense(&a, h, h, k, int8)?,
                value: dense(&a, h, h, v, int8)?,
                attn_out: dense(&a, h, h, o, int8)?,
                attn_norm: layer_norm(&a, h, cfg.layer_norm_eps, norm)?,
                intermediate: dense(&l, h, cfg.intermediate_size, "intermediate.dense", int8)?,
                output: dense(&l, cfg.intermediate_size, h, "output.dense", int8)?,
                out_norm: layer_norm(&l, h, cfg.layer_norm_eps, "output.LayerNorm")?,
                plain_norms: None,
            };
            let all_int8 =
                [&layer.query, &layer.key, &layer.value, &layer.attn_out, &layer.intermediate, &layer.output].iter().all(|d| d.int8().is_some());
            if all_int8 {
                layer.plain_norms = Some((plain_norm(&layer.attn_norm, cfg.layer_norm_eps)?, plain_norm(&layer.out_norm, cfg.layer_norm_eps)?));
            }
            layers.push(layer);
        }
        let tanh_gelu = matches!(cfg.hidden_act.as_str(), "gelu_new" | "gelu_pytorch_tanh" | "gelu_fast");
        Ok(BertModel {
            word,
            position,
            position_offset: cfg.position_offset as u32,
            token_type,
            relative_bias,
            relative_buckets: cfg.relative_attention_num_buckets,
            emb_norm,
            layers,
            heads: cfg.num_attention_heads,
            head_dim: h / cfg.num_attention_heads,
            tanh_gelu,
            device: vb.device().clone(),
            plain_enabled: true,
        })
    }

    pub fn device(&self) -> &Device {
        &self.device
    }

    /// Last hidden state `(batch, seq, hidden)` for token ids, token type ids and an attention mask (1 = token,
    /// 0 = padding), all `(batch, seq)` u32.
    pub fn forward(&self, ids: &Tensor, type_ids: &Tensor, mask: &Tensor) -> candle_core::Result<Tensor> {
        let (batch, seq) = ids.dims2()?;
        // XLM-RoBERTa and MPNet count positions from padding_idx + 1 = 2 (texts are padded on the right, so real
        // tokens sit at 0..len; padded positions are masked out of attention and pooling).
        let first = self.position_offset;
        let positions = Tensor::arange(first, first + seq as u32, &self.device)?.unsqueeze(0)?;
        let words = match &self.word {
            Words::Table(e) => e.forward(ids)?,
            Words::Rows(rows) => {
                let flat: Vec<u32> = ids.flatten_all()?.to_vec1()?;
                rows.gather(&flat, &self.device)?.reshape((batch, seq, self.heads * self.head_dim))?
            }
        };
        let mut x = words.broadcast_add(&self.position.forward(&positions)?)?;
        if let Some(tt) = &self.token_type {
            x = x.add(&tt.forward(type_ids)?)?;
        }
        let mut x = self.emb_norm.forward(&x)?;
        if let Some(layers) = self.plain_layers() {
            if let Some(lens) = prefix_lengths(mask)? {
                return self.forward_plain(&layers, &x, &lens);
            }
        }
        // Additive mask: 0 where attended, a large negative where padded: (batch, 1, 1, seq).
        let mut bias = ((mask.to_dtype(DType::F32)? - 1.0)? * 1e9)?.reshape((batch, 1, 1, seq))?;
        if let Some(rel) = &self.relative_bias {
            // (1, heads, seq, seq), the same for every layer.
            let buckets = Tensor::from_vec(relative_buckets(seq, self.relative_buckets, 128), (seq, seq), &self.device)?;
            let pos = rel.forward(&buckets)?.permute((2, 0, 1))?.unsqueeze(0)?;
            bias = bias.broadcast_add(&pos)?.contiguous()?;
        }
        let scale = 1.0 / (self.head_dim as f64).sqrt();
        for layer in &self.layers {
            let split =
                |t: Tensor| -> candle_core::Result<Tensor> { t.reshape((batch, seq, self.heads, self.head_dim))?.transpose(1, 2)?.contiguous() };
            let q = split(layer.query.forward(&x, Activation::None)?)?;
            let k = split(layer.key.forward(&x, Activation::None)?)?;
            let v = split(layer.value.forward(&x, Activation::None)?)?;
            let scores = (q.matmul(&k.t()?)? * scale)?.broadcast_add(&bias)?;
            let probs = candle_nn::ops::softmax_last_dim(&scores)?;
            let ctx = probs.matmul(&v)?.transpose(1, 2)?.contiguous()?.reshape((batch, seq, self.heads * self.head_dim))?;
            let attn = layer.attn_norm.forward(&(layer.attn_out.forward(&ctx, Activation::None)? + &x)?)?;
            let inter = if self.tanh_gelu {
                layer.intermediate.forward(&attn, Activation::None)?.gelu()?
            } else {
                layer.intermediate.forward(&attn, Activation::GeluErf)?
            };
            x = layer.out_norm.forward(&(layer.output.forward(&inter, Activation::None)? + &attn)?)?;
        }
        Ok(x)
    }
}
