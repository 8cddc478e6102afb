//! BERT-family encoders of a GGUF file, as llama.cpp's one BERT graph computes them for its two architectures:
//! - `nomic-bert` (nomic-embed-text-v1.5): rotary positions on Q and K (pairs half a head apart, theta from
//!   `rope.freq_base`), one fused QKV projection, a SwiGLU feed-forward (`down(silu(gate x) * up x)`), no biases;
//! - `bert` (bge, all-MiniLM, e5...): absolute position embeddings added to the token embeddings, Q, K and V
//!   (fused or not) with biases, a GELU feed-forward with biases.
//!
//! Both: token embeddings plus the first token-type row, a layer norm; per layer attention over the whole text
//! (Q scaled by 1/sqrt(head_dim)), output projection, residual, layer norm (post-norm, as BERT); feed-forward,
//! residual, layer norm. The text vector is the mean of the last hidden states or the `[CLS]` one, as the file's
//! `pooling_type` says.
//!
//! nomic-bert reads past the positions it was trained on (the file's `context_length`, 2,048 for
//! nomic-embed-text-v1.5) up to [`NOMIC_LONG_CONTEXT`] tokens as nomic's own model does with its
//! `rotary_scaling_factor` 2: dynamic NTK scaling, the rotary base of a longer text raised to
//! `base * (2 * len / trained - 1) ^ (d / (d - 2))` (`d` the head width), the positions inside the trained
//! context unchanged. llama.cpp has no such scaling: it refuses a text longer than its batch. Weights come as stored: Q8_0 matrices stay quantized in the products (`q8::Linear`), F16
//! and F32 ones are products in f32; the token-embedding table stays on disk and its rows are read as tokens need.

use candle_core::{DType, Tensor};

use crate::gemma::{add, rope_table};
use crate::gguf::{EmbeddingRows, EncoderCounts, GgufFile};
use crate::q8::{Input, Linear};
use crate::{ModelError, Pooling};

pub const NOMIC: &str = "nomic-bert";
pub const BERT: &str = "bert";

/// How many tokens a nomic-bert model reads (nomic-embed-text's 8,192), whatever shorter context its file was
/// trained on; a longer text is cut to it by the tokenizer.
pub const NOMIC_LONG_CONTEXT: usize = 8192;
/// nomic's `rotary_scaling_factor` for its long context (its model card).
const NOMIC_NTK_FACTOR: f64 = 2.0;
/// Attention scores held at once (12 heads over 2,048 tokens, 200 MB): a longer text's heads take turns.
const ATTENTION_SCORES: usize = 12 * 2048 * 2048;

/// Which of the two graphs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    Nomic,
    Bert,
}

#[derive(Debug, Clone, PartialEq)]
pub struct EncoderConfig {
    pub family: Family,
    pub hidden: usize,
    pub layers: usize,
    pub heads: usize,
    pub ffn: usize,
    pub eps: f32,
    pub rope_base: f32,
    /// The positions the model was trained on (the file's `context_length`).
    pub trained_positions: usize,
    /// The tokens it reads: `trained_positions`, or [`NOMIC_LONG_CONTEXT`] for nomic-bert.
    pub max_positions: usize,
    pub vocab: usize,
    pub pooling: Pooling,
}

impl EncoderConfig {
    pub fn from_gguf(g: &GgufFile) -> Result<Self, ModelError> {
        let architecture = g.architecture()?;
        let family = match architecture {
            NOMIC => Family::Nomic,
            BERT => Family::Bert,
            other => return Err(g.invalid(format!("`{other}` is not a BERT-family architecture"))),
        };
        let key = |k: &str| format!("{architecture}.{k}");
        // llama.cpp's pooling types: 1 mean, 2 the first token; a file without the key is pooled by the mean (what
        // sentence-transformers' BERT embedders and nomic use).
        let pooling = match g.usize_or(&key("pooling_type"), 1)? {
            1 => Pooling::Mean,
            2 => Pooling::Cls,
            other => return Err(g.invalid(format!("pooling type {other} is not supported (1 mean and 2 [CLS] are)"))),
        };
        let trained_positions = g.usize_or(&key("context_length"), 512)?;
        let cfg = EncoderConfig {
            family,
            hidden: g.usize(&key("embedding_length"))?,
            layers: g.usize(&key("block_count"))?,
            heads: g.usize(&key("attention.head_count"))?,
            ffn: g.usize(&key("feed_forward_length"))?,
            eps: g.f32_or(&key("attention.layer_norm_epsilon"), 1e-12)?,
            rope_base: g.f32_or(&key("rope.freq_base"), 10_000.0)?,
            trained_positions,
            max_positions: match family {
                Family::Nomic => trained_positions.max(NOMIC_LONG_CONTEXT),
                Family::Bert => trained_positions,
            },
            vocab: g.span("token_embd.weight")?.dims.first().copied().unwrap_or(0),
            pooling,
        };
        cfg.check().map_err(|message| g.invalid(message))?;
        Ok(cfg)
    }

    fn check(&self) -> Result<(), String> {
        let counts = EncoderCounts { hidden: self.hidden, layers: self.layers, heads: self.heads, ffn: self.ffn, context: self.trained_positions };
        counts.check(&[("vocabulary", self.vocab, 1 << 24)])?;
        if !self.hidden.is_multiple_of(self.heads) || !(self.hidden / self.heads).is_multiple_of(2) {
            return Err(format!("{} dimensions do not split into {} heads of an even width", self.hidden, self.heads));
        }
        if !self.eps.is_finite() || self.eps <= 0.0 || !self.rope_base.is_finite() || self.rope_base <= 1.0 {
            return Err(format!("layer-norm epsilon {} or rotary base {} is out of range", self.eps, self.rope_base));
        }
        Ok(())
    }
}

/// A weight matrix and its optional bias.
struct Dense {
    w: Linear,
    b: Option<Tensor>,
}

impl Dense {
    fn forward(&self, x: &Input) -> candle_core::Result<Tensor> {
        let y = self.w.forward(x)?;
        match &self.b {
            Some(b) => add(&y, b),
            None => Ok(y),
        }
    }
}

enum Qkv {
    Fused(Dense),
    Split(Dense, Dense, Dense),
}

struct Layer {
    qkv: Qkv,
    o: Dense,
    attn_norm: (Tensor, Tensor),
    up: Dense,
    /// SwiGLU's gate (nomic-bert); none: GELU (bert).
    gate: Option<Linear>,
    down: Dense,
    out_norm: (Tensor, Tensor),
}

pub struct EncoderModel {
    cfg: EncoderConfig,
    words: EmbeddingRows,
    /// The first token-type row, added to every token (llama.cpp's "sentence A").
    token_type: Option<Tensor>,
    /// `(max_positions, hidden)` absolute position embeddings (bert).
    positions: Option<Tensor>,
    embed_norm: (Tensor, Tensor),
    layers: Vec<Layer>,
    /// `(cos, sin)` of every trained position (nomic-bert).
    rope: Option<(Tensor, Tensor)>,
}

impl EncoderModel {
    pub fn load(g: &GgufFile, cfg: EncoderConfig) -> Result<Self, ModelError> {
        let model_err = |e: candle_core::Error| ModelError::Model(e.to_string());
        let h = cfg.hidden;
        let mat = |name: &str, out: usize, inp: usize| -> Result<Linear, ModelError> {
            Linear::new(std::sync::Arc::new(g.qtensor(name, &[out, inp])?)).map_err(model_err)
        };
        let opt = |name: String, n: usize| -> Result<Option<Tensor>, ModelError> {
            if g.has_tensor(&name) {
                g.tensor(&name, &[n]).map(Some)
            } else {
                Ok(None)
            }
        };
        let dense = |name: &str, out: usize, inp: usize| -> Result<Dense, ModelError> {
            Ok(Dense { w: mat(&format!("{name}.weight"), out, inp)?, b: opt(format!("{name}.bias"), out)? })
        };
        let norm = |name: &str| -> Result<(Tensor, Tensor), ModelError> {
            Ok((g.tensor(&format!("{name}.weight"), &[h])?, g.tensor(&format!("{name}.bias"), &[h])?))
        };
        let mut layers = Vec::with_capacity(cfg.layers);
        for i in 0..cfg.layers {
            let p = |n: &str| format!("blk.{i}.{n}");
            let qkv = if g.has_tensor(&p("attn_qkv.weight")) {
                Qkv::Fused(dense(&p("attn_qkv"), 3 * h, h)?)
            } else {
                Qkv::Split(dense(&p("attn_q"), h, h)?, dense(&p("attn_k"), h, h)?, dense(&p("attn_v"), h, h)?)
            };
            let gate = match cfg.family {
                Family::Nomic => Some(mat(&p("ffn_gate.weight"), cfg.ffn, h)?),
                Family::Bert => None,
            };
            layers.push(Layer {
                qkv,
                o: dense(&p("attn_output"), h, h)?,
                attn_norm: norm(&p("attn_output_norm"))?,
                up: dense(&p("ffn_up"), cfg.ffn, h)?,
                gate,
                down: dense(&p("ffn_down"), h, cfg.ffn)?,
                out_norm: norm(&p("layer_output_norm"))?,
            });
        }
        let token_type = if g.has_tensor("token_types.weight") {
            let rows = g.span("token_types.weight")?.dims.first().copied().unwrap_or(0);
            Some(g.tensor("token_types.weight", &[rows, h])?.get(0).map_err(model_err)?)
        } else {
            None
        };
        let (positions, rope) = match cfg.family {
            Family::Bert => (Some(g.tensor("position_embd.weight", &[cfg.max_positions, h])?), None),
            Family::Nomic => (None, Some(rope_table(cfg.rope_base, cfg.trained_positions, h / cfg.heads).map_err(model_err)?)),
        };
        let words = g.rows("token_embd.weight", cfg.vocab, h)?;
        let embed_norm = norm("token_embd_norm")?;
        Ok(EncoderModel { cfg, words, token_type, positions, embed_norm, layers, rope })
    }

    /// The text vector of one token sequence, pooled as the file says (not normalised).
    pub fn embed(&self, ids: &[u32]) -> candle_core::Result<Vec<f32>> {
        let cfg = &self.cfg;
        let seq = ids.len();
        if seq == 0 || seq > cfg.max_positions {
            candle_core::bail!("{seq} tokens (the model takes 1 to {})", cfg.max_positions);
        }
        let (h, heads) = (cfg.hidden, cfg.heads);
        let hd = h / heads;
        let scale = 1.0 / (hd as f64).sqrt();
        let mut x = self.words.gather(ids)?;
        if let Some(t) = &self.token_type {
            x = add(&x, t)?;
        }
        if let Some(p) = &self.positions {
            x = add(&x, &p.narrow(0, 0, seq)?.contiguous()?)?;
        }
        let norm = |x: &Tensor, (w, b): &(Tensor, Tensor)| candle_nn::ops::layer_norm(x, w, b, cfg.eps);
        x = norm(&x, &self.embed_norm)?;
        let rope = match &self.rope {
            Some(_) if seq > cfg.trained_positions => Some(rope_table(ntk_base(cfg.rope_base, seq, cfg.trained_positions, hd), seq, hd)?),
            Some((cos, sin)) => Some((cos.narrow(0, 0, seq)?, sin.narrow(0, 0, seq)?)),
            None => None,
        };
        // (seq, hidden) -> (heads, seq, hd), rotary positions applied when the model has them.
        let heads_of = |t: Tensor, rotate: bool| -> candle_core::Result<Tensor> {
            let t = t.contiguous()?.reshape((seq, heads, hd))?.transpose(0, 1)?.contiguous()?;
            match (&rope, rotate) {
                (Some((cos, sin)), true) => candle_nn::rotary_emb::rope(&t.unsqueeze(0)?, cos, sin)?.squeeze(0),
                _ => Ok(t),
            }
        };
        for layer in &self.layers {
            let input = Input::new(&x);
            let (q, k, v) = match &layer.qkv {
                Qkv::Fused(d) => {
                    let qkv = d.forward(&input)?;
                    (qkv.narrow(1, 0, h)?, qkv.narrow(1, h, h)?, qkv.narrow(1, 2 * h, h)?)
                }
                Qkv::Split(q, k, v) => (q.forward(&input)?, k.forward(&input)?, v.forward(&input)?),
            };
            let q = (heads_of(q, true)? * scale)?;
            let k = heads_of(k, true)?;
            let v = heads_of(v, false)?;
            let group = (ATTENTION_SCORES / (seq * seq)).clamp(1, heads);
            let mut outs = Vec::with_capacity(heads.div_ceil(group));
            for start in (0..heads).step_by(group) {
                let n = group.min(heads - start);
                let (q, k, v) = (q.narrow(0, start, n)?, k.narrow(0, start, n)?, v.narrow(0, start, n)?);
                outs.push(candle_nn::ops::softmax_last_dim(&q.matmul(&k.t()?)?)?.matmul(&v)?);
            }
            let attn = if outs.len() == 1 { outs.remove(0) } else { Tensor::cat(&outs, 0)? };
            let attn = attn.transpose(0, 1)?.contiguous()?.reshape((seq, h))?;
            let attn = layer.o.forward(&Input::new(&attn))?;
            x = norm(&add(&attn, &x)?, &layer.attn_norm)?;
            let input = Input::new(&x);
            let up = layer.up.forward(&input)?;
            let act = match &layer.gate {
                Some(gate) => (gate.forward(&input)?.silu()? * up)?,
                // ggml's GELU is the tanh approximation.
                None => up.gelu()?,
            };
            let ff = layer.down.forward(&Input::new(&act))?;
            x = norm(&add(&ff, &x)?, &layer.out_norm)?;
        }
        let pooled = match cfg.pooling {
            Pooling::Cls => x.get(0)?,
            _ => x.mean(0)?,
        };
        pooled.to_dtype(DType::F32)?.to_vec1()
    }
}

/// The rotary base for a text of `len` tokens past the `trained` positions: nomic's dynamic NTK scaling.
fn ntk_base(base: f32, len: usize, trained: usize, head_dim: usize) -> f32 {
    let d = head_dim as f64;
    let stretch = NOMIC_NTK_FACTOR * len as f64 / trained as f64 - (NOMIC_NTK_FACTOR - 1.0);
    (base as f64 * stretch.powf(d / (d - 2.0))) as f32
}

/// nomic's Matryoshka step before a cut (its model card): a layer norm without weights over the whole vector, so
/// the first values keep their share; the caller cuts and normalises.
pub fn matryoshka_norm(v: &mut [f32]) {
    let n = v.len().max(1) as f32;
    let mean = v.iter().sum::<f32>() / n;
    let var = v.iter().map(|x| (x - mean) * (x - mean)).sum::<f32>() / n;
    let inv = 1.0 / (var + 1e-5).sqrt();
    for x in v.iter_mut() {
        *x = (*x - mean) * inv;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ntk_base_starts_at_the_trained_length_and_grows_past_it() {
        // At the trained length the scaled base is the base: the table does not jump at the boundary.
        assert!((ntk_base(1000.0, 2048, 2048, 64) - 1000.0).abs() < 1e-3);
        // nomic's formula at 8,192 tokens, factor 2: 1000 * 7^(64/62).
        let want = 1000.0 * 7f64.powf(64.0 / 62.0);
        assert!((ntk_base(1000.0, 8192, 2048, 64) as f64 - want).abs() < 0.5, "{}", ntk_base(1000.0, 8192, 2048, 64));
        assert!(ntk_base(1000.0, 3000, 2048, 64) > 1000.0);
    }
}
