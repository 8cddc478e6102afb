//! How token vectors become one text vector: mean, max or the first token, over the tokens the mask keeps.

use candle_core::{DType, Tensor, D};

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
