//! A safetensors model file: its header (tensor names, dtypes, shapes, offsets) read without the weights, and the
//! weights read by positioned reads into candle tensors and packed int8 weights; the word embeddings stay on disk
//! and their rows are read as tokens need them ([`WordRows`]).

use std::collections::HashMap;
use std::fs;
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

use candle_core::{DType, Device, Tensor};
use serde_json::Value;
use tracing::debug;

use crate::bert::WordRows;
use crate::int8;
use crate::{FolderModelInfo, ModelError};

/// The safetensors header (tensor names, dtypes, shapes, offsets) and the raw header bytes.
pub(crate) fn safetensors_header(path: &Path) -> Result<(Value, Vec<u8>, u64, u64), ModelError> {
    let err = |message: String| ModelError::Invalid { path: path.into(), message };
    let mut f = fs::File::open(path).map_err(|e| ModelError::Read { path: path.into(), message: e.to_string() })?;
    let size = f.metadata().map(|m| m.len()).unwrap_or(0);
    let mut len = [0u8; 8];
    f.read_exact(&mut len).map_err(|e| err(format!("not a safetensors file: {e}")))?;
    let n = u64::from_le_bytes(len);
    if n == 0 || n > 100 * 1024 * 1024 || n + 8 > size {
        return Err(err("not a safetensors file (bad header length)".into()));
    }
    let mut header = vec![0u8; n as usize];
    f.read_exact(&mut header).map_err(|e| err(format!("truncated header: {e}")))?;
    let v: Value = serde_json::from_slice(&header).map_err(|e| err(format!("bad header: {e}")))?;
    // A sample of the weights themselves, so a fine-tune with identical shapes gets another fingerprint.
    let mut sample = vec![0u8; (1 << 20).min((size - 8 - n) as usize)];
    f.read_exact(&mut sample).map_err(|e| err(format!("truncated data: {e}")))?;
    if size > 8 + n + (2 << 20) {
        let mut tail = vec![0u8; 1 << 20];
        f.seek(SeekFrom::End(-(1 << 20))).map_err(|e| err(e.to_string()))?;
        f.read_exact(&mut tail).map_err(|e| err(e.to_string()))?;
        sample.extend_from_slice(&tail);
    }
    let mut digest_input = header;
    digest_input.extend_from_slice(&sample);
    Ok((v, digest_input, size, 8 + n))
}

pub(crate) fn shape_of(header: &Value, name: &str) -> Option<Vec<usize>> {
    let entry = tensor_entry(header, name)?.1;
    entry.get("shape")?.as_array()?.iter().map(|d| d.as_u64().map(|d| d as usize)).collect()
}

/// A tensor's header entry, with or without the architecture's prefix: `(full name, entry)`.
pub(crate) fn tensor_entry<'a>(header: &'a Value, name: &str) -> Option<(String, &'a Value)> {
    ["", "bert.", "roberta.", "mpnet."].into_iter().find_map(|p| {
        let full = format!("{p}{name}");
        header.get(&full).map(|e| (full, e))
    })
}

fn safetensors_dtype(name: &str) -> Option<DType> {
    match name {
        "F32" => Some(DType::F32),
        "F16" => Some(DType::F16),
        "BF16" => Some(DType::BF16),
        "F64" => Some(DType::F64),
        _ => None,
    }
}

/// A model file's weights: float tensors by name, and the int8 dense weights (`X.weight` stored `I8` beside its
/// `X.weight_scale`) by name where this CPU runs the int8 kernel (elsewhere they are dequantised into `floats`).
pub(crate) struct Weights {
    pub floats: HashMap<String, Tensor>,
    pub int8: HashMap<String, int8::Int8Weight>,
}

impl Weights {
    /// The float tensor `name`, dequantising an int8 one (layers the int8 kernel does not run, e.g. a classifier).
    pub fn take_float(&mut self, name: &str) -> Option<candle_core::Result<Tensor>> {
        if let Some(t) = self.floats.remove(name) {
            return Some(Ok(t));
        }
        self.int8.remove(name).map(|w| Tensor::from_vec(w.dequantize(), (w.out, w.inp), &Device::Cpu))
    }
}

/// Every tensor of the file but the word embeddings (read by positioned reads, only those bytes), and the word
/// embeddings as rows to read on demand.
pub(crate) fn read_weights(info: &FolderModelInfo, path: &Path) -> Result<(Weights, WordRows), ModelError> {
    let invalid = |message: String| ModelError::Invalid { path: path.into(), message };
    let file = fs::File::open(path).map_err(|e| ModelError::Read { path: path.into(), message: e.to_string() })?;
    let size = file.metadata().map(|m| m.len()).unwrap_or(0);
    let (word_name, word_entry) =
        tensor_entry(&info.header, "embeddings.word_embeddings.weight").ok_or_else(|| invalid("no `embeddings.word_embeddings.weight`".into()))?;
    // (dtype, or None for I8; shape; file offset; byte length)
    let span = |name: &str, e: &Value| -> Result<(Option<DType>, Vec<usize>, u64, u64), ModelError> {
        let bad = |what: &str| invalid(format!("tensor `{name}`: {what}"));
        let dtype_name = e.get("dtype").and_then(Value::as_str).ok_or_else(|| bad("no dtype"))?;
        let dtype = match dtype_name {
            "I8" => None,
            other => Some(safetensors_dtype(other).ok_or_else(|| bad(&format!("dtype {other} is not a float type")))?),
        };
        let shape: Vec<usize> = e
            .get("shape")
            .and_then(Value::as_array)
            .and_then(|a| a.iter().map(|d| d.as_u64().map(|d| d as usize)).collect())
            .ok_or_else(|| bad("bad shape"))?;
        let offs = e.get("data_offsets").and_then(Value::as_array).ok_or_else(|| bad("no data_offsets"))?;
        let (start, end) = match offs.as_slice() {
            [a, b] => (a.as_u64().ok_or_else(|| bad("bad data_offsets"))?, b.as_u64().ok_or_else(|| bad("bad data_offsets"))?),
            _ => return Err(bad("bad data_offsets")),
        };
        let elems = shape.iter().try_fold(1usize, |acc, d| acc.checked_mul(*d)).ok_or_else(|| bad("shape too large"))?;
        let width = dtype.map_or(1, |d| d.size_in_bytes()) as u64;
        let expected = (elems as u64).checked_mul(width).ok_or_else(|| bad("shape too large"))?;
        if end < start || end - start != expected || info.data_start + end > size {
            return Err(bad("data offsets do not match the shape or the file size"));
        }
        Ok((dtype, shape, info.data_start + start, end - start))
    };
    let (wdtype, wshape, wstart, _) = span(&word_name, word_entry)?;
    let wdtype = wdtype.ok_or_else(|| invalid("int8 word embeddings are not supported".into()))?;
    let words = match wshape.as_slice() {
        [rows, hidden] => WordRows::new(
            file.try_clone().map_err(|e| ModelError::Read { path: path.into(), message: e.to_string() })?,
            wstart,
            wdtype,
            *rows,
            *hidden,
        ),
        _ => return Err(invalid("word embeddings are not 2-dimensional".into())),
    };
    let mut floats = HashMap::new();
    let mut int8 = HashMap::new();
    let entries = info.header.as_object().ok_or_else(|| invalid("bad header".into()))?;
    // Every tensor is read into this one buffer and copied (or packed) from there.
    let mut buf = Vec::new();
    fn read<'b>(file: &fs::File, path: &Path, buf: &'b mut Vec<u8>, start: u64, len: u64) -> Result<&'b [u8], ModelError> {
        buf.resize(len as usize, 0);
        read_exact_at(file, buf, start).map_err(|e| ModelError::Read { path: path.into(), message: e.to_string() })?;
        Ok(buf)
    }
    let is_int8 = |name: &str| entries.get(name).and_then(|e| e.get("dtype")).and_then(Value::as_str) == Some("I8");
    let run_int8 = int8::enabled();
    for (name, e) in entries {
        if name == "__metadata__" || *name == word_name {
            continue;
        }
        // An int8 weight's scale is read with the weight.
        if name.strip_suffix("_scale").is_some_and(is_int8) {
            continue;
        }
        let dtype_name = e.get("dtype").and_then(Value::as_str);
        if dtype_name == Some("I8") {
            let (_, shape, start, len) = span(name, e)?;
            let [out, inp] = shape[..] else { return Err(invalid(format!("int8 tensor `{name}` is not 2-dimensional"))) };
            let scale_name = format!("{name}_scale");
            let scale_entry = entries.get(&scale_name).ok_or_else(|| invalid(format!("int8 tensor `{name}` has no `{scale_name}`")))?;
            let (sdtype, sshape, sstart, slen) = span(&scale_name, scale_entry)?;
            if sdtype != Some(DType::F32) || sshape != [out] {
                return Err(invalid(format!("`{scale_name}` must be F32 [{out}], one scale per output")));
            }
            let scale: Vec<f32> =
                read(&file, path, &mut buf, sstart, slen)?.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect();
            let q = as_i8(read(&file, path, &mut buf, start, len)?);
            if run_int8 {
                // Packed straight from the buffer: the weights are held once.
                int8.insert(name.clone(), int8::Int8Weight::new(out, inp, q, scale));
            } else {
                let t = Tensor::from_vec(int8::dequantize_rows(q, &scale), (out, inp), &Device::Cpu)
                    .map_err(|e| ModelError::Model(format!("tensor `{name}`: {e}")))?;
                floats.insert(name.clone(), t);
            }
            continue;
        }
        // Integer buffers (`position_ids`) are not weights.
        if dtype_name.and_then(safetensors_dtype).is_none() {
            debug!(tensor = %name, "skipped (not a float tensor)");
            continue;
        }
        let (Some(dtype), shape, start, len) = span(name, e)? else { unreachable!("a float dtype was checked above") };
        let t = Tensor::from_raw_buffer(read(&file, path, &mut buf, start, len)?, dtype, &shape, &Device::Cpu)
            .and_then(|t| t.to_dtype(DType::F32))
            .map_err(|e| ModelError::Model(format!("tensor `{name}`: {e}")))?;
        floats.insert(name.clone(), t);
    }
    Ok((Weights { floats, int8 }, words))
}

/// Bytes as the int8 values they store.
fn as_i8(b: &[u8]) -> &[i8] {
    // SAFETY: u8 and i8 have the same size and alignment and every bit pattern is valid for both.
    unsafe { std::slice::from_raw_parts(b.as_ptr() as *const i8, b.len()) }
}

#[cfg(unix)]
pub(crate) fn read_exact_at(file: &fs::File, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
    std::os::unix::fs::FileExt::read_exact_at(file, buf, offset)
}

#[cfg(not(unix))]
pub(crate) fn read_exact_at(file: &fs::File, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
    let mut f = file;
    f.seek(SeekFrom::Start(offset))?;
    f.read_exact(buf)
}
