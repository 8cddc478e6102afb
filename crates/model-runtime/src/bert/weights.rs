//! Where the encoder's weights come from: the word-embedding table read row by row from disk ([`WordRows`]) or
//! held as a candle embedding, and each dense layer's weight in f32 or int8 ([`Dense`]), norms under their old or
//! new names.

use std::collections::HashMap;

use candle_core::{DType, Device, Module, Tensor};
use candle_nn::{Embedding, LayerNorm, Linear, VarBuilder};

use crate::int8::{Activation, Int8Linear, Int8Weight};

/// The word-embedding table read row by row from the safetensors file (positioned reads, no mapping: a file
/// changed underneath gives an error, never a crash).
pub struct WordRows {
    file: std::fs::File,
    /// Absolute offset of row 0 in the file.
    start: u64,
    dtype: DType,
    pub(super) rows: usize,
    pub(super) hidden: usize,
}

impl WordRows {
    pub fn new(file: std::fs::File, start: u64, dtype: DType, rows: usize, hidden: usize) -> Self {
        WordRows { file, start, dtype, rows, hidden }
    }

    /// `(ids.len(), hidden)` f32 rows for the token ids.
    pub(super) fn gather(&self, ids: &[u32], device: &Device) -> candle_core::Result<Tensor> {
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

pub(super) enum Words {
    Table(Embedding),
    Rows(WordRows),
}

/// A dense layer: f32 weights through candle, or int8 weights through [`Int8Linear`].
pub(super) enum Dense {
    Float(Linear),
    Int8(Int8Linear),
}

impl Dense {
    pub(super) fn int8(&self) -> Option<&Int8Linear> {
        match self {
            Dense::Int8(l) => Some(l),
            Dense::Float(_) => None,
        }
    }

    pub(super) fn forward(&self, x: &Tensor, act: Activation) -> candle_core::Result<Tensor> {
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
pub(super) fn dense(
    vb: &VarBuilder,
    in_dim: usize,
    out_dim: usize,
    name: &str,
    int8: &mut HashMap<String, Int8Weight>,
) -> candle_core::Result<Dense> {
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

pub(super) fn layer_norm(vb: &VarBuilder, dim: usize, eps: f64, name: &str) -> candle_core::Result<LayerNorm> {
    let vb = vb.pp(name);
    // Old TF-converted checkpoints name them gamma / beta.
    let (w, b) =
        if vb.contains_tensor("weight") { (vb.get(dim, "weight")?, vb.get(dim, "bias")?) } else { (vb.get(dim, "gamma")?, vb.get(dim, "beta")?) };
    Ok(LayerNorm::new(w, b, eps))
}
