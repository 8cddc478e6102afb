//! EmbeddingGemma: the Gemma 3 text encoder with bidirectional attention (local layers see 256 tokens each way,
//! every sixth layer sees all), mean pooling, the two sentence-transformers dense projections (768 -> 3072 ->
//! 768), as llama.cpp's `gemma-embedding` architecture computes it. Weights come from a GGUF file as stored:
//! quantized matrices (Q8_0, k-quants) stay quantized in the products (`q8::Linear`), norms are f32, the
//! token-embedding table stays on disk and its rows are read as tokens need them.
//!
//! Per layer: RMS norm; Q, K, V projections, Q and K RMS-normed per head, rotary positions (theta 1e6 on global
//! layers, 1e4 on local ones), Q scaled by 1/sqrt(head_dim), attention (K and V shared by query-head groups),
//! output projection, RMS norm, residual; RMS norm, GELU(tanh)-gated feed-forward, RMS norm, residual. The
//! token embeddings are scaled by sqrt(hidden). Gemma's norms multiply by (1 + w): the GGUF stores 1 + w.

use candle_core::{DType, Device, Tensor};

use crate::gguf::{EmbeddingRows, EncoderCounts, GgufFile};
use crate::q8::{Input, Linear};
use crate::ModelError;

pub const ARCHITECTURE: &str = "gemma-embedding";

#[derive(Debug, Clone, PartialEq)]
pub struct GemmaConfig {
    pub hidden: usize,
    pub layers: usize,
    pub heads: usize,
    pub kv_heads: usize,
    pub head_dim: usize,
    pub ffn: usize,
    pub eps: f64,
    pub rope_global: f32,
    pub rope_local: f32,
    /// Local layers attend to keys at most `sliding_window / 2` positions away (llama.cpp's symmetric window).
    pub sliding_window: usize,
    /// Every `global_every`-th layer (1-based) attends globally.
    pub global_every: usize,
    pub max_positions: usize,
    pub vocab: usize,
    /// `(in, out)` of the dense projections after pooling (none when the file has none).
    pub dense: Vec<(usize, usize)>,
}

impl GemmaConfig {
    pub fn from_gguf(g: &GgufFile) -> Result<Self, ModelError> {
        let a = ARCHITECTURE;
        let key = |k: &str| format!("{a}.{k}");
        let hidden = g.usize(&key("embedding_length"))?;
        let heads = g.usize(&key("attention.head_count"))?;
        let head_dim = g.usize_or(&key("attention.key_length"), hidden / heads.max(1))?;
        let mut dense = Vec::new();
        for name in ["dense_2", "dense_3"] {
            if g.has_tensor(&format!("{name}.weight")) {
                let span = g.span(&format!("{name}.weight"))?;
                let [out, inp] = span.dims[..] else {
                    return Err(g.invalid(format!("`{name}.weight` is not 2-dimensional")));
                };
                dense.push((inp, out));
            }
        }
        let vocab = g.span("token_embd.weight")?.dims.first().copied().unwrap_or(0);
        let cfg = GemmaConfig {
            hidden,
            layers: g.usize(&key("block_count"))?,
            heads,
            kv_heads: g.usize_or(&key("attention.head_count_kv"), heads)?,
            head_dim,
            ffn: g.usize(&key("feed_forward_length"))?,
            eps: g.f32_or(&key("attention.layer_norm_rms_epsilon"), 1e-6)? as f64,
            rope_global: g.f32_or(&key("rope.freq_base"), 1_000_000.0)?,
            rope_local: g.f32_or(&key("rope.freq_base_swa"), 10_000.0)?,
            sliding_window: g.usize_or(&key("attention.sliding_window"), 512)?,
            global_every: 6,
            max_positions: g.usize_or(&key("context_length"), 2048)?,
            vocab,
            dense,
        };
        cfg.check().map_err(|message| g.invalid(message))?;
        Ok(cfg)
    }

    fn check(&self) -> Result<(), String> {
        let counts = EncoderCounts { hidden: self.hidden, layers: self.layers, heads: self.heads, ffn: self.ffn, context: self.max_positions };
        counts.check(&[("head_count_kv", self.kv_heads, self.heads), ("key_length", self.head_dim, 4096)])?;
        if !self.heads.is_multiple_of(self.kv_heads) || !self.head_dim.is_multiple_of(2) {
            return Err(format!("{} heads over {} key/value heads of {} dimensions", self.heads, self.kv_heads, self.head_dim));
        }
        let mut width = self.hidden;
        for (inp, out) in &self.dense {
            if *inp != width {
                return Err(format!("a dense projection takes {inp} values, the pooled vector has {width}"));
            }
            width = *out;
        }
        if width != self.hidden && !self.dense.is_empty() {
            return Err(format!("the dense projections end at {width} values, not {}", self.hidden));
        }
        Ok(())
    }

    /// The width of the vectors the model gives.
    pub fn output_width(&self) -> usize {
        self.dense.last().map_or(self.hidden, |d| d.1)
    }
}

struct Layer {
    attn_norm: Tensor,
    q: Linear,
    k: Linear,
    v: Linear,
    o: Linear,
    q_norm: Tensor,
    k_norm: Tensor,
    post_attn_norm: Tensor,
    ffn_norm: Tensor,
    gate: Linear,
    up: Linear,
    down: Linear,
    post_ffn_norm: Tensor,
    global: bool,
}

pub struct GemmaModel {
    cfg: GemmaConfig,
    words: EmbeddingRows,
    layers: Vec<Layer>,
    final_norm: Tensor,
    dense: Vec<Linear>,
    /// `(cos, sin)` of every position, `(max_positions, head_dim / 2)`, for the global and the local theta.
    rope_global: (Tensor, Tensor),
    rope_local: (Tensor, Tensor),
}

/// `(cos, sin)` of rotary positions (pairs half a head apart, llama.cpp's NEOX layout) for `positions` positions.
pub(super) fn rope_table(theta: f32, positions: usize, head_dim: usize) -> candle_core::Result<(Tensor, Tensor)> {
    let half = head_dim / 2;
    let inv: Vec<f32> = (0..half).map(|i| 1.0 / theta.powf((2 * i) as f32 / head_dim as f32)).collect();
    let mut cos = Vec::with_capacity(positions * half);
    let mut sin = Vec::with_capacity(positions * half);
    for p in 0..positions {
        for f in &inv {
            let a = p as f32 * f;
            cos.push(a.cos());
            sin.push(a.sin());
        }
    }
    Ok((Tensor::from_vec(cos, (positions, half), &Device::Cpu)?, Tensor::from_vec(sin, (positions, half), &Device::Cpu)?))
}

impl GemmaModel {
    pub fn load(g: &GgufFile, cfg: GemmaConfig) -> Result<Self, ModelError> {
        let model_err = |e: candle_core::Error| ModelError::Model(e.to_string());
        let (h, hd) = (cfg.hidden, cfg.head_dim);
        let mat = |name: String, out: usize, inp: usize| -> Result<Linear, ModelError> {
            Linear::new(std::sync::Arc::new(g.qtensor(&name, &[out, inp])?)).map_err(model_err)
        };
        let vec = |name: String, n: usize| g.tensor(&name, &[n]);
        let mut layers = Vec::with_capacity(cfg.layers);
        for i in 0..cfg.layers {
            let p = |n: &str| format!("blk.{i}.{n}.weight");
            layers.push(Layer {
                attn_norm: vec(p("attn_norm"), h)?,
                q: mat(p("attn_q"), cfg.heads * hd, h)?,
                k: mat(p("attn_k"), cfg.kv_heads * hd, h)?,
                v: mat(p("attn_v"), cfg.kv_heads * hd, h)?,
                o: mat(p("attn_output"), h, cfg.heads * hd)?,
                q_norm: vec(p("attn_q_norm"), hd)?,
                k_norm: vec(p("attn_k_norm"), hd)?,
                post_attn_norm: vec(p("post_attention_norm"), h)?,
                ffn_norm: vec(p("ffn_norm"), h)?,
                gate: mat(p("ffn_gate"), cfg.ffn, h)?,
                up: mat(p("ffn_up"), cfg.ffn, h)?,
                down: mat(p("ffn_down"), h, cfg.ffn)?,
                post_ffn_norm: vec(p("post_ffw_norm"), h)?,
                global: (i + 1).is_multiple_of(cfg.global_every),
            });
        }
        let final_norm = vec("output_norm.weight".into(), h)?;
        let dense = cfg
            .dense
            .iter()
            .zip(["dense_2", "dense_3"])
            .map(|((inp, out), name)| mat(format!("{name}.weight"), *out, *inp))
            .collect::<Result<Vec<_>, _>>()?;
        let words = g.rows("token_embd.weight", cfg.vocab, h)?;
        let rope_global = rope_table(cfg.rope_global, cfg.max_positions, hd).map_err(model_err)?;
        let rope_local = rope_table(cfg.rope_local, cfg.max_positions, hd).map_err(model_err)?;
        Ok(GemmaModel { cfg, words, layers, final_norm, dense, rope_global, rope_local })
    }

    /// The text vector of one token sequence: mean of the last hidden states, through the dense projections
    /// (not normalised).
    pub fn embed(&self, ids: &[u32]) -> candle_core::Result<Vec<f32>> {
        let cfg = &self.cfg;
        let seq = ids.len();
        if seq == 0 || seq > cfg.max_positions {
            candle_core::bail!("{seq} tokens (the model takes 1 to {})", cfg.max_positions);
        }
        let eps = cfg.eps as f32;
        let mut x = (self.words.gather(ids)? * (cfg.hidden as f64).sqrt())?;
        let half = cfg.sliding_window / 2;
        let local_mask = if seq > half + 1 {
            let mut m = vec![0f32; seq * seq];
            for i in 0..seq {
                for j in 0..seq {
                    if i.abs_diff(j) > half {
                        m[i * seq + j] = f32::NEG_INFINITY;
                    }
                }
            }
            Some(Tensor::from_vec(m, (seq, seq), &Device::Cpu)?)
        } else {
            None
        };
        let (hd, heads, kv) = (cfg.head_dim, cfg.heads, cfg.kv_heads);
        let group = heads / kv;
        let scale = 1.0 / (hd as f64).sqrt();
        for layer in &self.layers {
            let (cos, sin) = if layer.global { &self.rope_global } else { &self.rope_local };
            let (cos, sin) = (cos.narrow(0, 0, seq)?, sin.narrow(0, 0, seq)?);
            let h = Input::new(&candle_nn::ops::rms_norm(&x, &layer.attn_norm, eps)?);
            // (seq, heads, hd) -> normed per head -> (1, heads, seq, hd) with rotary positions.
            let heads_of = |t: Tensor, n: usize, norm: &Tensor| -> candle_core::Result<Tensor> {
                let t = candle_nn::ops::rms_norm(&t.reshape((seq, n, hd))?, norm, eps)?;
                candle_nn::rotary_emb::rope(&t.transpose(0, 1)?.contiguous()?.unsqueeze(0)?, &cos, &sin)?.squeeze(0)
            };
            let q = (heads_of(layer.q.forward(&h)?, heads, &layer.q_norm)? * scale)?;
            let k = heads_of(layer.k.forward(&h)?, kv, &layer.k_norm)?;
            let v = layer.v.forward(&h)?.reshape((seq, kv, hd))?.transpose(0, 1)?.contiguous()?;
            let mut outs = Vec::with_capacity(kv);
            for g in 0..kv {
                // The query heads of this key/value head as one (group * seq, hd) matrix.
                let qg = q.narrow(0, g * group, group)?.reshape((group * seq, hd))?;
                let kg = k.get(g)?;
                let vg = v.get(g)?;
                let mut scores = qg.matmul(&kg.t()?)?.reshape((group, seq, seq))?;
                if let (false, Some(m)) = (layer.global, &local_mask) {
                    scores = add(&scores, m)?;
                }
                let probs = candle_nn::ops::softmax_last_dim(&scores)?;
                outs.push(probs.reshape((group * seq, seq))?.matmul(&vg)?.reshape((group, seq, hd))?);
            }
            let attn = Tensor::cat(&outs, 0)?.transpose(0, 1)?.contiguous()?.reshape((seq, heads * hd))?;
            let attn = candle_nn::ops::rms_norm(&layer.o.forward(&Input::new(&attn))?, &layer.post_attn_norm, eps)?;
            x = add(&x, &attn)?;
            let h = Input::new(&candle_nn::ops::rms_norm(&x, &layer.ffn_norm, eps)?);
            let ff = gated_gelu(&layer.gate.forward(&h)?, &layer.up.forward(&h)?)?;
            let ff = candle_nn::ops::rms_norm(&layer.down.forward(&Input::new(&ff))?, &layer.post_ffn_norm, eps)?;
            x = add(&x, &ff)?;
        }
        let x = candle_nn::ops::rms_norm(&x, &self.final_norm, eps)?;
        let mut pooled = x.mean_keepdim(0)?;
        for d in &self.dense {
            pooled = d.forward(&Input::new(&pooled))?;
        }
        pooled.squeeze(0)?.to_dtype(DType::F32)?.to_vec1()
    }
}

/// `a + b`, `b` repeated over `a`'s leading dimensions, in the calling thread: candle spreads a large
/// element-wise sum over its own thread pool, whose thread then waits for a core that the products' threads hold.
pub(super) fn add(a: &Tensor, b: &Tensor) -> candle_core::Result<Tensor> {
    let mut sum = a.flatten_all()?.to_vec1::<f32>()?;
    let b = b.flatten_all()?.to_vec1::<f32>()?;
    if b.is_empty() || !sum.len().is_multiple_of(b.len()) {
        candle_core::bail!("adding {} values to {}", b.len(), sum.len());
    }
    for part in sum.chunks_exact_mut(b.len()) {
        for (s, b) in part.iter_mut().zip(&b) {
            *s += b;
        }
    }
    Tensor::from_vec(sum, a.shape(), &Device::Cpu)
}

/// `gelu(gate) * up`, the feed-forward's gate. With AVX-512 ([`super::int8::enabled`]) sixteen lanes at a time
/// in one pass over rows in parallel: candle's `gelu` is a scalar `tanhf` per value.
fn gated_gelu(gate: &Tensor, up: &Tensor) -> candle_core::Result<Tensor> {
    if !super::int8::enabled() {
        return gate.gelu()? * up;
    }
    let mut g = gate.flatten_all()?.to_vec1::<f32>()?;
    let u = up.flatten_all()?.to_vec1::<f32>()?;
    if g.len() != u.len() || !g.len().is_multiple_of(16) {
        return gate.gelu()? * up;
    }
    use rayon::prelude::*;
    g.par_chunks_mut(1 << 14).zip(u.par_chunks(1 << 14)).for_each(|(g, u)| {
        for (g, u) in g.chunks_exact_mut(16).zip(u.chunks_exact(16)) {
            // SAFETY: `int8::enabled()` saw AVX-512 F/BW/VNNI; both chunks hold 16 values.
            #[cfg(target_arch = "x86_64")]
            unsafe {
                use std::arch::x86_64::*;
                let y = _mm512_mul_ps(super::int8::vnni::gelu_tanh(_mm512_loadu_ps(g.as_ptr())), _mm512_loadu_ps(u.as_ptr()));
                _mm512_storeu_ps(g.as_mut_ptr(), y);
            }
            // Elsewhere `int8::enabled()` is false and the plain product above answers.
            #[cfg(not(target_arch = "x86_64"))]
            let _ = (g, u);
        }
    });
    Tensor::from_vec(g, gate.shape(), &Device::Cpu)
}

/// Keep the first `dims` values (a Matryoshka cut): the caller normalises again.
pub fn truncate(mut v: Vec<f32>, dims: usize) -> Vec<f32> {
    v.truncate(dims);
    v
}
