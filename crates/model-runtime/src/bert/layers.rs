//! One encoder layer's weights, and the int8 models' path through the layers on plain buffers ([`plain`]) where
//! every dense layer is int8 and the model a plain BERT.

use candle_core::Tensor;
use candle_nn::LayerNorm;

use super::weights::Dense;
use super::BertModel;
use crate::plain;

pub(super) struct Layer {
    pub(super) query: Dense,
    pub(super) key: Dense,
    pub(super) value: Dense,
    pub(super) attn_out: Dense,
    pub(super) attn_norm: LayerNorm,
    pub(super) intermediate: Dense,
    pub(super) output: Dense,
    pub(super) out_norm: LayerNorm,
    /// The two norms as plain vectors, where every dense layer is int8 (see [`BertModel::plain_layers`]).
    pub(super) plain_norms: Option<(plain::Norm, plain::Norm)>,
}

impl Layer {
    pub(super) fn plain(&self) -> Option<plain::Layer<'_>> {
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
pub(super) fn plain_norm(n: &LayerNorm, eps: f64) -> candle_core::Result<plain::Norm> {
    let bias = match n.bias() {
        Some(b) => b.to_vec1()?,
        None => vec![0.0; n.weight().dims1()?],
    };
    Ok(plain::Norm { weight: n.weight().to_vec1()?, bias, eps: eps as f32 })
}

impl BertModel {
    /// The layers on plain buffers ([`plain`]), where every dense layer is int8 and the model a plain BERT.
    pub(super) fn plain_layers(&self) -> Option<Vec<plain::Layer<'_>>> {
        if !self.plain_enabled || self.relative_bias.is_some() || self.tanh_gelu || self.layers.is_empty() {
            return None;
        }
        self.layers.iter().map(Layer::plain).collect()
    }

    /// The layers on `x` (after the embeddings' norm) by [`plain::encode`]: the real tokens packed, the padding
    /// rows of the result zero.
    pub(super) fn forward_plain(&self, layers: &[plain::Layer], x: &Tensor, lens: &[usize]) -> candle_core::Result<Tensor> {
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
