//! A BERT encoder (the architecture of all-MiniLM-L6-v2, bge-small, e5-small...) on candle, CPU, f32.
//!
//! Weights are read by their Hugging Face names, with or without the `bert.` prefix. Only the encoder is
//! built (no pooler, no heads): the provider pools the last hidden state itself.

use candle_core::{DType, Device, Module, Tensor, D};
use candle_nn::{Embedding, LayerNorm, Linear, VarBuilder};

/// The architecture numbers a BERT checkpoint needs.
#[derive(Debug, Clone, PartialEq)]
pub struct BertConfig {
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
}

fn linear(vb: &VarBuilder, in_dim: usize, out_dim: usize, name: &str) -> candle_core::Result<Linear> {
    let vb = vb.pp(name);
    let w = vb.get((out_dim, in_dim), "weight")?;
    let b = vb.get(out_dim, "bias")?;
    Ok(Linear::new(w, Some(b)))
}

fn layer_norm(vb: &VarBuilder, dim: usize, eps: f64, name: &str) -> candle_core::Result<LayerNorm> {
    let vb = vb.pp(name);
    // Old TF-converted checkpoints name them gamma / beta.
    let (w, b) = if vb.contains_tensor("weight") {
        (vb.get(dim, "weight")?, vb.get(dim, "bias")?)
    } else {
        (vb.get(dim, "gamma")?, vb.get(dim, "beta")?)
    };
    Ok(LayerNorm::new(w, b, eps))
}

struct Layer {
    query: Linear,
    key: Linear,
    value: Linear,
    attn_out: Linear,
    attn_norm: LayerNorm,
    intermediate: Linear,
    output: Linear,
    out_norm: LayerNorm,
}

pub struct BertModel {
    word: Embedding,
    position: Embedding,
    token_type: Embedding,
    emb_norm: LayerNorm,
    layers: Vec<Layer>,
    heads: usize,
    head_dim: usize,
    tanh_gelu: bool,
    device: Device,
}

impl BertModel {
    pub fn load(vb: VarBuilder, cfg: &BertConfig) -> candle_core::Result<Self> {
        let vb = if vb.contains_tensor("bert.embeddings.word_embeddings.weight") { vb.pp("bert") } else { vb };
        let h = cfg.hidden_size;
        if cfg.num_attention_heads == 0 || !h.is_multiple_of(cfg.num_attention_heads) {
            candle_core::bail!("hidden size {h} is not a multiple of {} attention heads", cfg.num_attention_heads);
        }
        let e = vb.pp("embeddings");
        let word = Embedding::new(e.get((cfg.vocab_size, h), "word_embeddings.weight")?, h);
        let position = Embedding::new(e.get((cfg.max_position_embeddings, h), "position_embeddings.weight")?, h);
        let token_type = Embedding::new(e.get((cfg.type_vocab_size, h), "token_type_embeddings.weight")?, h);
        let emb_norm = layer_norm(&e, h, cfg.layer_norm_eps, "LayerNorm")?;
        let mut layers = Vec::with_capacity(cfg.num_hidden_layers);
        for i in 0..cfg.num_hidden_layers {
            let l = vb.pp(format!("encoder.layer.{i}"));
            let a = l.pp("attention");
            layers.push(Layer {
                query: linear(&a, h, h, "self.query")?,
                key: linear(&a, h, h, "self.key")?,
                value: linear(&a, h, h, "self.value")?,
                attn_out: linear(&a, h, h, "output.dense")?,
                attn_norm: layer_norm(&a, h, cfg.layer_norm_eps, "output.LayerNorm")?,
                intermediate: linear(&l, h, cfg.intermediate_size, "intermediate.dense")?,
                output: linear(&l, cfg.intermediate_size, h, "output.dense")?,
                out_norm: layer_norm(&l, h, cfg.layer_norm_eps, "output.LayerNorm")?,
            });
        }
        let tanh_gelu = matches!(cfg.hidden_act.as_str(), "gelu_new" | "gelu_pytorch_tanh" | "gelu_fast");
        Ok(BertModel {
            word,
            position,
            token_type,
            emb_norm,
            layers,
            heads: cfg.num_attention_heads,
            head_dim: h / cfg.num_attention_heads,
            tanh_gelu,
            device: vb.device().clone(),
        })
    }

    pub fn device(&self) -> &Device {
        &self.device
    }

    /// Last hidden state `(batch, seq, hidden)` for token ids, token type ids and an attention mask (1 = token,
    /// 0 = padding), all `(batch, seq)` u32.
    pub fn forward(&self, ids: &Tensor, type_ids: &Tensor, mask: &Tensor) -> candle_core::Result<Tensor> {
        let (batch, seq) = ids.dims2()?;
        let positions = Tensor::arange(0u32, seq as u32, &self.device)?.unsqueeze(0)?;
        let x = self
            .word
            .forward(ids)?
            .broadcast_add(&self.position.forward(&positions)?)?
            .add(&self.token_type.forward(type_ids)?)?;
        let mut x = self.emb_norm.forward(&x)?;
        // Additive mask: 0 where attended, a large negative where padded: (batch, 1, 1, seq).
        let bias = ((mask.to_dtype(DType::F32)? - 1.0)? * 1e9)?.reshape((batch, 1, 1, seq))?;
        let scale = 1.0 / (self.head_dim as f64).sqrt();
        for layer in &self.layers {
            let split = |t: Tensor| -> candle_core::Result<Tensor> {
                t.reshape((batch, seq, self.heads, self.head_dim))?.transpose(1, 2)?.contiguous()
            };
            let q = split(layer.query.forward(&x)?)?;
            let k = split(layer.key.forward(&x)?)?;
            let v = split(layer.value.forward(&x)?)?;
            let scores = (q.matmul(&k.t()?)? * scale)?.broadcast_add(&bias)?;
            let probs = candle_nn::ops::softmax_last_dim(&scores)?;
            let ctx = probs.matmul(&v)?.transpose(1, 2)?.contiguous()?.reshape((batch, seq, self.heads * self.head_dim))?;
            let attn = layer.attn_norm.forward(&(layer.attn_out.forward(&ctx)? + &x)?)?;
            let inter = layer.intermediate.forward(&attn)?;
            let inter = if self.tanh_gelu { inter.gelu()? } else { inter.gelu_erf()? };
            x = layer.out_norm.forward(&(layer.output.forward(&inter)? + &attn)?)?;
        }
        Ok(x)
    }
}

/// Mean of the token vectors where the mask is 1: `(batch, hidden)`.
pub fn mean_pool(hidden: &Tensor, mask: &Tensor) -> candle_core::Result<Tensor> {
    let m = mask.to_dtype(DType::F32)?.unsqueeze(D::Minus1)?; // (batch, seq, 1)
    let summed = hidden.broadcast_mul(&m)?.sum(1)?; // (batch, hidden)
    let counts = m.sum(1)?.clamp(1e-9f32, f32::MAX)?; // (batch, 1)
    summed.broadcast_div(&counts)
}

/// The first token's vector (`[CLS]`): `(batch, hidden)`.
pub fn cls_pool(hidden: &Tensor) -> candle_core::Result<Tensor> {
    hidden.narrow(1, 0, 1)?.squeeze(1)
}
