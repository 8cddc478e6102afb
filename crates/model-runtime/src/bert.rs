//! A BERT encoder (the architecture of all-MiniLM-L6-v2, bge-small, e5-small, multilingual-e5-small...), its
//! XLM-RoBERTa variant (paraphrase-multilingual-mpnet-base-v2, bge-m3, multilingual-e5-base/large) and its MPNet
//! variant (all-mpnet-base-v2) on candle, CPU, f32.
//!
//! Weights are read by their Hugging Face names, with or without the `bert.` / `roberta.` / `mpnet.` prefix.
//! Only the encoder is built (no pooler, no heads): the provider pools the last hidden state itself.
//! XLM-RoBERTa is BERT with positions counted from `pad_token_id + 1` (RoBERTa style) and one token type.
//! MPNet differs from BERT in three places: attention weights under other names, positions counted from 2
//! (RoBERTa style, no token types), and a learnt relative-position bias added to every layer's attention scores.
//!
//! The word-embedding table (most of a multilingual model: 250k x 384 floats for multilingual-e5-small) can stay
//! on disk: [`WordRows`] reads only the rows of the tokens a forward pass needs.

use candle_core::{DType, Device, Module, Tensor, D};
use candle_nn::{Embedding, LayerNorm, Linear, VarBuilder};
use std::collections::HashMap;

use crate::int8::{Activation, Int8Linear, Int8Weight};
use crate::plain;

/// Encoder family of a checkpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Architecture {
    Bert,
    /// XLM-RoBERTa / RoBERTa: BERT's weights, RoBERTa's positions.
    XlmRoberta,
    MpNet,
}

/// The architecture numbers a BERT (or MPNet) checkpoint needs.
#[derive(Debug, Clone, PartialEq)]
pub struct BertConfig {
    pub architecture: Architecture,
    /// MPNet's relative-position buckets (32); unused for BERT.
    pub relative_attention_num_buckets: usize,
    pub vocab_size: usize,
    pub hidden_size: usize,
    pub num_hidden_layers: usize,
    pub num_attention_heads: usize,
    pub intermediate_size: usize,
    pub max_position_embeddings: usize,
    pub type_vocab_size: usize,
    pub layer_norm_eps: f64,
    /// `gelu` (erf, BERT's) or `gelu_new` / `gelu_pytorch_tanh` (tanh approximation).
    pub hidden_act: String,
    /// Position id of a text's first token: 0 for BERT, `pad_token_id + 1` (2) for XLM-RoBERTa and MPNet.
    pub position_offset: usize,
}

/// The word-embedding table read row by row from the safetensors file (positioned reads, no mapping: a file
/// changed underneath gives an error, never a crash).
pub struct WordRows {
    file: std::fs::File,
    /// Absolute offset of row 0 in the file.
    start: u64,
    dtype: DType,
    rows: usize,
    hidden: usize,
}

impl WordRows {
    pub fn new(file: std::fs::File, start: u64, dtype: DType, rows: usize, hidden: usize) -> Self {
        WordRows { file, start, dtype, rows, hidden }
    }

    /// `(ids.len(), hidden)` f32 rows for the token ids.
    fn gather(&self, ids: &[u32], device: &Device) -> candle_core::Result<Tensor> {
        let row_bytes = self.hidden * self.dtype.size_in_bytes();
        let mut bytes = vec![0u8; ids.len() * row_bytes];
        // Each distinct token is read once per pass.
        let mut seen: std::collections::HashMap<u32, usize> = std::collections::HashMap::new();
        for (i, &id) in ids.iter().enumerate() {
            if id as usize >= self.rows {
                candle_core::bail!("token id {id} outside the {} word embeddings", self.rows);
            }
            let dst = i * row_bytes;
            if let Some(&src) = seen.get(&id) {
                bytes.copy_within(src..src + row_bytes, dst);
                continue;
            }
            read_at(&self.file, &mut bytes[dst..dst + row_bytes], self.start + id as u64 * row_bytes as u64)
                .map_err(|e| candle_core::Error::Msg(format!("reading word embeddings: {e}")))?;
            seen.insert(id, dst);
        }
        Tensor::from_raw_buffer(&bytes, self.dtype, &[ids.len(), self.hidden], device)?.to_dtype(DType::F32)
    }
}

#[cfg(unix)]
fn read_at(file: &std::fs::File, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
    std::os::unix::fs::FileExt::read_exact_at(file, buf, offset)
}

#[cfg(windows)]
fn read_at(file: &std::fs::File, mut buf: &mut [u8], mut offset: u64) -> std::io::Result<()> {
    while !buf.is_empty() {
        match std::os::windows::fs::FileExt::seek_read(file, buf, offset)? {
            0 => return Err(std::io::ErrorKind::UnexpectedEof.into()),
            n => {
                buf = &mut buf[n..];
                offset += n as u64;
            }
        }
    }
    Ok(())
}

enum Words {
    Table(Embedding),
    Rows(WordRows),
}

/// A dense layer: f32 weights through candle, or int8 weights through [`Int8Linear`].
enum Dense {
    Float(Linear),
    Int8(Int8Linear),
}

impl Dense {
    fn int8(&self) -> Option<&Int8Linear> {
        match self {
            Dense::Int8(l) => Some(l),
            Dense::Float(_) => None,
        }
    }

    fn forward(&self, x: &Tensor, act: Activation) -> candle_core::Result<Tensor> {
        match self {
            Dense::Float(l) => {
                let y = l.forward(x)?;
                if act == Activation::GeluErf {
                    y.gelu_erf()
                } else {
                    Ok(y)
                }
            }
            Dense::Int8(l) => {
                let mut dims = x.dims().to_vec();
                let inp = dims.pop().unwrap_or(0);
                let rows = dims.iter().product::<usize>();
                let data: Vec<f32> = x.flatten_all()?.to_vec1()?;
                debug_assert_eq!(data.len(), rows * inp);
                dims.push(l.out_features());
                Tensor::from_vec(l.forward(&data, rows, act), dims, x.device())
            }
        }
    }
}

/// Layer `name` under `vb`: int8 when `int8` holds its weight (taken out of it), else f32 from `vb`.
fn dense(vb: &VarBuilder, in_dim: usize, out_dim: usize, name: &str, int8: &mut HashMap<String, Int8Weight>) -> candle_core::Result<Dense> {
    let vb = vb.pp(name);
    let key = format!("{}.weight", vb.prefix());
    let b = vb.get(out_dim, "bias")?;
    if let Some(w) = int8.remove(&key) {
        if (w.out, w.inp) != (out_dim, in_dim) {
            candle_core::bail!("`{key}` is {}x{}, expected {out_dim}x{in_dim}", w.out, w.inp);
        }
        return Ok(Dense::Int8(Int8Linear::new(w, b.to_vec1()?)));
    }
    let w = vb.get((out_dim, in_dim), "weight")?;
    Ok(Dense::Float(Linear::new(w, Some(b))))
}

fn layer_norm(vb: &VarBuilder, dim: usize, eps: f64, name: &str) -> candle_core::Result<LayerNorm> {
    let vb = vb.pp(name);
    // Old TF-converted checkpoints name them gamma / beta.
    let (w, b) =
        if vb.contains_tensor("weight") { (vb.get(dim, "weight")?, vb.get(dim, "bias")?) } else { (vb.get(dim, "gamma")?, vb.get(dim, "beta")?) };
    Ok(LayerNorm::new(w, b, eps))
}

struct Layer {
    query: Dense,
    key: Dense,
    value: Dense,
    attn_out: Dense,
    attn_norm: LayerNorm,
    intermediate: Dense,
    output: Dense,
    out_norm: LayerNorm,
    /// The two norms as plain vectors, where every dense layer is int8 (see [`BertModel::plain_layers`]).
    plain_norms: Option<(plain::Norm, plain::Norm)>,
}

impl Layer {
    fn plain(&self) -> Option<plain::Layer<'_>> {
        let (attn_norm, out_norm) = self.plain_norms.as_ref()?;
        Some(plain::Layer {
            query: self.query.int8()?,
            key: self.key.int8()?,
            value: self.value.int8()?,
            attn_out: self.attn_out.int8()?,
            attn_norm,
            intermediate: self.intermediate.int8()?,
            output: self.output.int8()?,
            out_norm,
        })
    }
}

/// A layer norm's parameters as plain vectors.
fn plain_norm(n: &LayerNorm, eps: f64) -> candle_core::Result<plain::Norm> {
    let bias = match n.bias() {
        Some(b) => b.to_vec1()?,
        None => vec![0.0; n.weight().dims1()?],
    };
    Ok(plain::Norm { weight: n.weight().to_vec1()?, bias, eps: eps as f32 })
}

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

impl BertModel {
    /// The layers on plain buffers ([`plain`]), where every dense layer is int8 and the model a plain BERT.
    fn plain_layers(&self) -> Option<Vec<plain::Layer<'_>>> {
        if !self.plain_enabled || self.relative_bias.is_some() || self.tanh_gelu || self.layers.is_empty() {
            return None;
        }
        self.layers.iter().map(Layer::plain).collect()
    }

    /// The layers on `x` (after the embeddings' norm) by [`plain::encode`]: the real tokens packed, the padding
    /// rows of the result zero.
    fn forward_plain(&self, layers: &[plain::Layer], x: &Tensor, lens: &[usize]) -> candle_core::Result<Tensor> {
        let (batch, seq, hidden) = x.dims3()?;
        let all: Vec<f32> = x.flatten_all()?.to_vec1()?;
        let mut packed = Vec::with_capacity(lens.iter().sum::<usize>() * hidden);
        for (b, len) in lens.iter().enumerate() {
            packed.extend_from_slice(&all[b * seq * hidden..(b * seq + len) * hidden]);
        }
        plain::encode(layers, &mut packed, lens, self.heads);
        let mut out = vec![0f32; batch * seq * hidden];
        let mut at = 0;
        for (b, len) in lens.iter().enumerate() {
            out[b * seq * hidden..(b * seq + len) * hidden].copy_from_slice(&packed[at..at + len * hidden]);
            at += len * hidden;
        }
        Tensor::from_vec(out, (batch, seq, hidden), x.device())
    }
}

/// Each row's length when the mask is ones then zeros (padding on the right, as `forward_padded` builds it);
/// `None` otherwise.
fn prefix_lengths(mask: &Tensor) -> candle_core::Result<Option<Vec<usize>>> {
    let rows: Vec<Vec<u32>> = mask.to_dtype(DType::U32)?.to_vec2()?;
    let mut lens = Vec::with_capacity(rows.len());
    for r in rows {
        let len = r.iter().take_while(|m| **m != 0).count();
        if r[len..].iter().any(|m| *m != 0) {
            return Ok(None);
        }
        lens.push(len);
    }
    Ok(Some(lens))
}

/// MPNet's (T5's) bucket of each relative position `key - query`, `seq x seq` row-major: exact buckets for
/// small distances, logarithmic ones up to `max_distance`, one half of the buckets per direction.
fn relative_buckets(seq: usize, buckets: usize, max_distance: usize) -> Vec<u32> {
    let half = (buckets / 2).max(1);
    let exact = (half / 2).max(1);
    let mut out = Vec::with_capacity(seq * seq);
    for q in 0..seq {
        for k in 0..seq {
            let n = q as i64 - k as i64; // -(key - query)
            let mut b = if n < 0 { half } else { 0 };
            let n = n.unsigned_abs() as usize;
            b += if n < exact {
                n
            } else {
                let log = ((n as f64 / exact as f64).ln() / (max_distance as f64 / exact as f64).ln() * (half - exact) as f64) as usize;
                (exact + log).min(half - 1)
            };
            out.push(b as u32);
        }
    }
    out
}

/// Mean of the token vectors where the mask is 1: `(batch, hidden)`.
pub fn mean_pool(hidden: &Tensor, mask: &Tensor) -> candle_core::Result<Tensor> {
    let m = mask.to_dtype(DType::F32)?.unsqueeze(D::Minus1)?; // (batch, seq, 1)
    let summed = hidden.broadcast_mul(&m)?.sum(1)?; // (batch, hidden)
    let counts = m.sum(1)?.clamp(1e-9f32, f32::MAX)?; // (batch, 1)
    summed.broadcast_div(&counts)
}

/// The largest value of each dimension over the tokens where the mask is 1: `(batch, hidden)`.
pub fn max_pool(hidden: &Tensor, mask: &Tensor) -> candle_core::Result<Tensor> {
    let m = mask.to_dtype(DType::F32)?.unsqueeze(D::Minus1)?; // (batch, seq, 1)
    let masked = hidden.broadcast_add(&((m - 1.0)? * 1e9)?)?;
    masked.max(1)
}

/// The first token's vector (`[CLS]`): `(batch, hidden)`.
pub fn cls_pool(hidden: &Tensor) -> candle_core::Result<Tensor> {
    hidden.narrow(1, 0, 1)?.squeeze(1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    /// Seeded values in -0.5..0.5.
    fn values(n: usize, seed: &mut u64) -> Vec<f32> {
        (0..n)
            .map(|_| {
                *seed ^= *seed << 13;
                *seed ^= *seed >> 7;
                *seed ^= *seed << 17;
                ((*seed >> 11) as f64 / (1u64 << 53) as f64 - 0.5) as f32
            })
            .collect()
    }

    /// A tiny random MPNet checkpoint: name -> (shape, values).
    fn tiny_mpnet(cfg: &BertConfig) -> HashMap<String, (Vec<usize>, Vec<f32>)> {
        let (h, i) = (cfg.hidden_size, cfg.intermediate_size);
        let mut seed = 0x9E37_79B9_7F4A_7C15u64;
        let mut w = HashMap::new();
        let mut put = |name: String, shape: Vec<usize>| {
            let v = values(shape.iter().product(), &mut seed);
            w.insert(name, (shape, v));
        };
        put("embeddings.word_embeddings.weight".into(), vec![cfg.vocab_size, h]);
        put("embeddings.position_embeddings.weight".into(), vec![cfg.max_position_embeddings, h]);
        put("embeddings.LayerNorm.weight".into(), vec![h]);
        put("embeddings.LayerNorm.bias".into(), vec![h]);
        put("encoder.relative_attention_bias.weight".into(), vec![cfg.relative_attention_num_buckets, cfg.num_attention_heads]);
        for l in 0..cfg.num_hidden_layers {
            let p = format!("encoder.layer.{l}.");
            for n in ["q", "k", "v", "o"] {
                put(format!("{p}attention.attn.{n}.weight"), vec![h, h]);
                put(format!("{p}attention.attn.{n}.bias"), vec![h]);
            }
            put(format!("{p}attention.LayerNorm.weight"), vec![h]);
            put(format!("{p}attention.LayerNorm.bias"), vec![h]);
            put(format!("{p}intermediate.dense.weight"), vec![i, h]);
            put(format!("{p}intermediate.dense.bias"), vec![i]);
            put(format!("{p}output.dense.weight"), vec![h, i]);
            put(format!("{p}output.dense.bias"), vec![h]);
            put(format!("{p}output.LayerNorm.weight"), vec![h]);
            put(format!("{p}output.LayerNorm.bias"), vec![h]);
        }
        w
    }

    /// MPNet's forward pass for one unpadded text, written out with plain loops (the reference).
    fn naive_mpnet(w: &HashMap<String, (Vec<usize>, Vec<f32>)>, cfg: &BertConfig, ids: &[u32]) -> Vec<Vec<f32>> {
        let (h, heads) = (cfg.hidden_size, cfg.num_attention_heads);
        let d = h / heads;
        let g = |n: &str| &w[n].1;
        let linear = |x: &[f32], n: &str, out: usize| -> Vec<f32> {
            let (wt, b) = (g(&format!("{n}.weight")), g(&format!("{n}.bias")));
            (0..out).map(|o| b[o] + x.iter().enumerate().map(|(j, v)| v * wt[o * x.len() + j]).sum::<f32>()).collect()
        };
        let norm = |x: &[f32], n: &str| -> Vec<f32> {
            let mean = x.iter().sum::<f32>() / x.len() as f32;
            let var = x.iter().map(|v| (v - mean).powi(2)).sum::<f32>() / x.len() as f32;
            let (wt, b) = (g(&format!("{n}.weight")), g(&format!("{n}.bias")));
            x.iter().enumerate().map(|(j, v)| (v - mean) / (var + cfg.layer_norm_eps as f32).sqrt() * wt[j] + b[j]).collect()
        };
        let erf_gelu = |x: f32| {
            // erf by its Taylor series (|x| is small here).
            let z = x as f64 / std::f64::consts::SQRT_2;
            let (mut term, mut sum) = (z, z);
            for n in 1..60 {
                term *= -z * z / n as f64;
                sum += term / (2 * n + 1) as f64;
            }
            (0.5 * x as f64 * (1.0 + 2.0 / std::f64::consts::PI.sqrt() * sum)) as f32
        };
        let l = ids.len();
        let mut x: Vec<Vec<f32>> = (0..l)
            .map(|t| {
                let we = &g("embeddings.word_embeddings.weight")[ids[t] as usize * h..][..h];
                let pe = &g("embeddings.position_embeddings.weight")[(t + 2) * h..][..h];
                norm(&we.iter().zip(pe).map(|(a, b)| a + b).collect::<Vec<_>>(), "embeddings.LayerNorm")
            })
            .collect();
        let rel = g("encoder.relative_attention_bias.weight");
        let buckets = relative_buckets(l, cfg.relative_attention_num_buckets, 128);
        for layer in 0..cfg.num_hidden_layers {
            let p = format!("encoder.layer.{layer}.");
            let q: Vec<Vec<f32>> = x.iter().map(|v| linear(v, &format!("{p}attention.attn.q"), h)).collect();
            let k: Vec<Vec<f32>> = x.iter().map(|v| linear(v, &format!("{p}attention.attn.k"), h)).collect();
            let v: Vec<Vec<f32>> = x.iter().map(|v| linear(v, &format!("{p}attention.attn.v"), h)).collect();
            let mut ctx = vec![vec![0f32; h]; l];
            for hd in 0..heads {
                for i in 0..l {
                    let scores: Vec<f32> = (0..l)
                        .map(|j| {
                            let dot: f32 = (0..d).map(|e| q[i][hd * d + e] * k[j][hd * d + e]).sum();
                            dot / (d as f32).sqrt() + rel[buckets[i * l + j] as usize * heads + hd]
                        })
                        .collect();
                    let max = scores.iter().cloned().fold(f32::MIN, f32::max);
                    let exp: Vec<f32> = scores.iter().map(|s| (s - max).exp()).collect();
                    let total: f32 = exp.iter().sum();
                    for j in 0..l {
                        for e in 0..d {
                            ctx[i][hd * d + e] += exp[j] / total * v[j][hd * d + e];
                        }
                    }
                }
            }
            x = (0..l)
                .map(|t| {
                    let o = linear(&ctx[t], &format!("{p}attention.attn.o"), h);
                    let a = norm(&o.iter().zip(&x[t]).map(|(a, b)| a + b).collect::<Vec<_>>(), &format!("{p}attention.LayerNorm"));
                    let inter: Vec<f32> = linear(&a, &format!("{p}intermediate.dense"), cfg.intermediate_size).into_iter().map(erf_gelu).collect();
                    let out = linear(&inter, &format!("{p}output.dense"), h);
                    norm(&out.iter().zip(&a).map(|(a, b)| a + b).collect::<Vec<_>>(), &format!("{p}output.LayerNorm"))
                })
                .collect();
        }
        x
    }

    #[test]
    fn mpnet_forward_matches_a_plain_loop_reference_with_padding() {
        let cfg = BertConfig {
            architecture: Architecture::MpNet,
            relative_attention_num_buckets: 32,
            vocab_size: 40,
            hidden_size: 8,
            num_hidden_layers: 2,
            num_attention_heads: 2,
            intermediate_size: 16,
            max_position_embeddings: 40,
            type_vocab_size: 1,
            layer_norm_eps: 1e-5,
            hidden_act: "gelu".into(),
            position_offset: 2,
        };
        let w = tiny_mpnet(&cfg);
        let dev = Device::Cpu;
        let tensors = w.iter().map(|(n, (shape, v))| (format!("mpnet.{n}"), Tensor::from_vec(v.clone(), shape.as_slice(), &dev).unwrap())).collect();
        let model = BertModel::load(VarBuilder::from_tensors(tensors, DType::F32, &dev), &cfg, None, &mut HashMap::new()).unwrap();
        // Two texts in one batch: the shorter is padded (id 1) and must come out as if alone. Long enough
        // (20 tokens) for logarithmic position buckets.
        let long: Vec<u32> = (0..20).map(|i| (i * 7 + 3) % 40).collect();
        let short: Vec<u32> = vec![0, 5, 9, 2];
        let seq = long.len();
        let mut ids = long.clone();
        ids.extend(short.iter().copied().chain(std::iter::repeat_n(1, seq - short.len())));
        let mask: Vec<u32> =
            std::iter::repeat_n(1, seq).chain(std::iter::repeat_n(1, short.len())).chain(std::iter::repeat_n(0, seq - short.len())).collect();
        let t = |v: Vec<u32>| Tensor::from_vec(v, (2, seq), &dev).unwrap();
        let hidden = model.forward(&t(ids), &t(vec![0; 2 * seq]), &t(mask)).unwrap();
        let got: Vec<Vec<Vec<f32>>> = hidden.to_vec3().unwrap();
        for (b, text) in [&long, &short].into_iter().enumerate() {
            let want = naive_mpnet(&w, &cfg, text);
            for (tok, row) in want.iter().enumerate() {
                for (e, v) in row.iter().enumerate() {
                    assert!((got[b][tok][e] - v).abs() < 1e-4, "text {b} token {tok} dim {e}: {} vs {v}", got[b][tok][e]);
                }
            }
        }
    }

    /// A tiny random BERT checkpoint (names without prefix).
    fn tiny_bert(cfg: &BertConfig, positions: usize) -> HashMap<String, (Vec<usize>, Vec<f32>)> {
        let (h, i) = (cfg.hidden_size, cfg.intermediate_size);
        let mut seed = 0x2545_F491_4F6C_DD1Du64;
        let mut w = HashMap::new();
        let mut put = |name: String, shape: Vec<usize>| {
            let v = values(shape.iter().product(), &mut seed);
            w.insert(name, (shape, v));
        };
        put("embeddings.word_embeddings.weight".into(), vec![cfg.vocab_size, h]);
        put("embeddings.position_embeddings.weight".into(), vec![positions, h]);
        put("embeddings.token_type_embeddings.weight".into(), vec![cfg.type_vocab_size, h]);
        put("embeddings.LayerNorm.weight".into(), vec![h]);
        put("embeddings.LayerNorm.bias".into(), vec![h]);
        for l in 0..cfg.num_hidden_layers {
            let p = format!("encoder.layer.{l}.");
            for n in ["attention.self.query", "attention.self.key", "attention.self.value", "attention.output.dense"] {
                put(format!("{p}{n}.weight"), vec![h, h]);
                put(format!("{p}{n}.bias"), vec![h]);
            }
            for n in ["attention.output.LayerNorm", "output.LayerNorm"] {
                put(format!("{p}{n}.weight"), vec![h]);
                put(format!("{p}{n}.bias"), vec![h]);
            }
            put(format!("{p}intermediate.dense.weight"), vec![i, h]);
            put(format!("{p}intermediate.dense.bias"), vec![i]);
            put(format!("{p}output.dense.weight"), vec![h, i]);
            put(format!("{p}output.dense.bias"), vec![h]);
        }
        w
    }

    fn tensors(w: &HashMap<String, (Vec<usize>, Vec<f32>)>, prefix: &str) -> HashMap<String, Tensor> {
        w.iter().map(|(n, (shape, v))| (format!("{prefix}{n}"), Tensor::from_vec(v.clone(), shape.as_slice(), &Device::Cpu).unwrap())).collect()
    }

    #[test]
    fn int8_dense_layers_give_the_float_models_hidden_states() {
        if !super::super::int8::supported() {
            eprintln!("skipped: this CPU has no AVX-512 VNNI (int8 weights are dequantised to f32 here)");
            return;
        }
        // Heads of 16, 32 and 64 columns (the attention has register paths for 32 and 64, a plain loop else).
        for (hidden, heads) in [(64, 4), (64, 2), (128, 2)] {
            int8_model_matches(hidden, heads);
        }
    }

    fn int8_model_matches(hidden: usize, heads: usize) {
        let cfg = BertConfig {
            architecture: Architecture::Bert,
            relative_attention_num_buckets: 32,
            vocab_size: 50,
            hidden_size: hidden,
            num_hidden_layers: 2,
            num_attention_heads: heads,
            intermediate_size: 128,
            max_position_embeddings: 32,
            type_vocab_size: 1,
            layer_norm_eps: 1e-5,
            hidden_act: "gelu".into(),
            position_offset: 0,
        };
        let mut w = tiny_bert(&cfg, 32);
        // Every encoder dense weight quantised symmetrically per output row; the float twin gets the same values
        // dequantised, so the two models differ only by the activations' int8 rounding.
        let mut int8 = HashMap::new();
        for (name, (shape, v)) in w.iter_mut() {
            if !(name.starts_with("encoder.") && name.ends_with(".weight") && shape.len() == 2) {
                continue;
            }
            let (out, inp) = (shape[0], shape[1]);
            let mut q = Vec::with_capacity(out * inp);
            let mut scale = Vec::with_capacity(out);
            for row in v.chunks(inp) {
                let s = row.iter().fold(0f32, |m, x| m.max(x.abs())) / 127.0;
                q.extend(row.iter().map(|x| (x / s).round() as i8));
                scale.push(s);
            }
            let iw = Int8Weight::new(out, inp, &q, scale);
            *v = iw.dequantize();
            int8.insert(name.clone(), iw);
        }
        assert_eq!(int8.len(), 12);
        // The same int8 layers for a model that will run them through candle's tensors (below).
        let mut int8_again = int8.clone();
        let dev = Device::Cpu;
        let float = BertModel::load(VarBuilder::from_tensors(tensors(&w, ""), DType::F32, &dev), &cfg, None, &mut HashMap::new()).unwrap();
        let quant = BertModel::load(VarBuilder::from_tensors(tensors(&w, ""), DType::F32, &dev), &cfg, None, &mut int8).unwrap();
        assert!(int8.is_empty(), "every int8 weight was taken by a layer");
        let ids: Vec<u32> = vec![2, 7, 7, 49, 3, 12, 30, 1, 9, 0, 0, 0];
        let mask: Vec<u32> = vec![1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0];
        let t = |v: Vec<u32>| Tensor::from_vec(v, (1, 12), &dev).unwrap();
        let run = |m: &BertModel| -> Vec<Vec<f32>> {
            m.forward(&t(ids.clone()), &t(vec![0; 12]), &t(mask.clone())).unwrap().squeeze(0).unwrap().to_vec2().unwrap()
        };
        let (a, b) = (run(&float), run(&quant));
        for (tok, (x, y)) in a.iter().zip(&b).take(9).enumerate() {
            let cos = crate::cosine(x, y);
            assert!(cos > 0.999, "token {tok}: cosine {cos}");
        }

        // A batch of sequences of different lengths, padded on the right: the int8 model runs on plain buffers
        // (`plain`); each sequence gives what the float model gives it alone, and what the same int8 model gives
        // through candle's tensors with the padding masked.
        assert!(quant.plain_layers().is_some() && float.plain_layers().is_none());
        let lens = [9usize, 12, 4];
        let seqs: Vec<Vec<u32>> = lens.iter().enumerate().map(|(s, &n)| (0..n).map(|i| ((i * 7 + s * 13 + 2) % 50) as u32).collect()).collect();
        let (mut ids, mut mask) = (Vec::new(), Vec::new());
        for q in &seqs {
            ids.extend(q.iter().copied().chain(std::iter::repeat_n(0, 12 - q.len())));
            mask.extend(std::iter::repeat_n(1u32, q.len()).chain(std::iter::repeat_n(0, 12 - q.len())));
        }
        let t3 = |v: Vec<u32>| Tensor::from_vec(v, (3, 12), &dev).unwrap();
        let batch =
            |m: &BertModel| -> Vec<Vec<Vec<f32>>> { m.forward(&t3(ids.clone()), &t3(vec![0; 36]), &t3(mask.clone())).unwrap().to_vec3().unwrap() };
        let plain = batch(&quant);
        let mut tensors_only = BertModel::load(VarBuilder::from_tensors(tensors(&w, ""), DType::F32, &dev), &cfg, None, &mut int8_again).unwrap();
        tensors_only.plain_enabled = false;
        assert!(tensors_only.plain_layers().is_none());
        let masked = batch(&tensors_only);
        for (s, q) in seqs.iter().enumerate() {
            let n = q.len();
            let alone = |m: &BertModel| -> Vec<Vec<f32>> {
                let t1 = |v: Vec<u32>| Tensor::from_vec(v, (1, n), &dev).unwrap();
                m.forward(&t1(q.clone()), &t1(vec![0; n]), &t1(vec![1; n])).unwrap().squeeze(0).unwrap().to_vec2().unwrap()
            };
            let reference = alone(&float);
            for tok in 0..n {
                let cos = crate::cosine(&plain[s][tok], &reference[tok]);
                assert!(cos > 0.999, "sequence {s} token {tok}: cosine {cos} against the float model");
                let cos = crate::cosine(&plain[s][tok], &masked[s][tok]);
                assert!(cos > 0.99999, "sequence {s} token {tok}: cosine {cos} against candle's path");
            }
            assert!(plain[s][n..].iter().flatten().all(|v| *v == 0.0), "padding rows are zero");
        }
    }

    #[test]
    fn xlm_roberta_positions_start_after_padding_and_word_rows_read_from_a_file() {
        let bert_cfg = BertConfig {
            architecture: Architecture::Bert,
            relative_attention_num_buckets: 32,
            vocab_size: 50,
            hidden_size: 8,
            num_hidden_layers: 2,
            num_attention_heads: 2,
            intermediate_size: 16,
            max_position_embeddings: 30,
            type_vocab_size: 1,
            layer_norm_eps: 1e-5,
            hidden_act: "gelu".into(),
            position_offset: 0,
        };
        let w = tiny_bert(&bert_cfg, 32);
        let dev = Device::Cpu;
        // BERT reads positions 0.. of a table; XLM-R the same table shifted by the two reserved rows.
        let mut bert_w = w.clone();
        let (shape, pos) = &w["embeddings.position_embeddings.weight"];
        bert_w.insert("embeddings.position_embeddings.weight".into(), (vec![30, shape[1]], pos[2 * shape[1]..].to_vec()));
        let xlmr_cfg = BertConfig { architecture: Architecture::XlmRoberta, max_position_embeddings: 32, position_offset: 2, ..bert_cfg.clone() };
        let bert = BertModel::load(VarBuilder::from_tensors(tensors(&bert_w, ""), DType::F32, &dev), &bert_cfg, None, &mut HashMap::new()).unwrap();
        let xlmr =
            BertModel::load(VarBuilder::from_tensors(tensors(&w, "roberta."), DType::F32, &dev), &xlmr_cfg, None, &mut HashMap::new()).unwrap();
        // The word table in a file, read row by row.
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("words.bin");
        let (wshape, words) = &w["embeddings.word_embeddings.weight"];
        let mut bytes = vec![0u8; 12]; // some bytes before the table
        bytes.extend(words.iter().flat_map(|x| x.to_le_bytes()));
        std::fs::write(&path, &bytes).unwrap();
        let rows = WordRows::new(std::fs::File::open(&path).unwrap(), 12, DType::F32, wshape[0], wshape[1]);
        let mut no_words = tensors(&w, "roberta.");
        no_words.remove("roberta.embeddings.word_embeddings.weight");
        let mapped = BertModel::load(VarBuilder::from_tensors(no_words, DType::F32, &dev), &xlmr_cfg, Some(rows), &mut HashMap::new()).unwrap();

        let ids: Vec<u32> = vec![0, 7, 7, 49, 3, 12, 1, 1];
        let mask: Vec<u32> = vec![1, 1, 1, 1, 1, 1, 0, 0];
        let t = |v: Vec<u32>| Tensor::from_vec(v, (1, 8), &dev).unwrap();
        let run = |m: &BertModel| -> Vec<f32> {
            m.forward(&t(ids.clone()), &t(vec![0; 8]), &t(mask.clone())).unwrap().flatten_all().unwrap().to_vec1().unwrap()
        };
        let (a, b, c) = (run(&bert), run(&xlmr), run(&mapped));
        for i in 0..a.len() {
            assert!((a[i] - b[i]).abs() < 1e-5, "value {i}: bert {} xlmr {}", a[i], b[i]);
            assert_eq!(b[i], c[i], "value {i}: rows read from the file differ from the table");
        }
        // A token id outside the table is an error, not a crash.
        assert!(mapped.forward(&t(vec![50; 8]), &t(vec![0; 8]), &t(vec![1; 8])).is_err());
    }

    #[test]
    fn relative_position_buckets_follow_mpnet() {
        // Values of MPNet's bucket function (32 buckets, max distance 128) for key - query = -200..200.
        let b = relative_buckets(401, 32, 128);
        // Computed with MPNet's own formula (Hugging Face `relative_position_bucket`), in Python.
        let at = |rel: i64| b[200 * 401 + (200 + rel) as usize];
        let expect: &[(i64, u32)] = &[
            (0, 0),
            (-1, 1),
            (-7, 7),
            (-8, 8),
            (-11, 8),
            (-16, 10),
            (-20, 10),
            (-32, 12),
            (-64, 14),
            (-127, 15),
            (-200, 15),
            (1, 17),
            (7, 23),
            (8, 24),
            (12, 25),
            (16, 26),
            (23, 27),
            (32, 28),
            (45, 28),
            (64, 30),
            (91, 31),
            (200, 31),
        ];
        for &(rel, want) in expect {
            assert_eq!(at(rel), want, "key - query = {rel}");
        }
    }
}
