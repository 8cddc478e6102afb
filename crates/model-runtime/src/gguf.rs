//! A GGUF model file (llama.cpp's format), read with candle's `gguf_file` reader and checked before use: every
//! tensor's shape, type and byte range must fit the file, so a hostile or truncated file gives an error naming
//! the tensor, never a panic or a huge allocation. Tensors are read one at a time by positioned reads; the
//! token-embedding table stays on disk and its rows are read as tokens need them ([`EmbeddingRows`]).

use std::collections::HashMap;
use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};

use candle_core::quantized::gguf_file::{Content, Value};
use candle_core::quantized::{ggml_file, GgmlDType, QTensor};
use candle_core::{Device, Tensor};
use sha2::Digest;

use crate::ModelError;

/// Whether `path` is a GGUF file (by its first four bytes).
pub fn is_gguf(path: &Path) -> bool {
    let mut magic = [0u8; 4];
    path.is_file() && fs::File::open(path).and_then(|mut f| f.read_exact(&mut magic)).is_ok() && &magic == b"GGUF"
}

/// One tensor's place in the file, checked against the file's size.
#[derive(Debug, Clone)]
pub struct TensorSpan {
    pub dtype: GgmlDType,
    /// Row-major dimensions (outermost first, as candle orders them).
    pub dims: Vec<usize>,
    /// Absolute offset of its first byte.
    pub start: u64,
    pub bytes: u64,
}

/// An opened GGUF file: its metadata and the checked place of every tensor.
pub struct GgufFile {
    pub path: PathBuf,
    pub size: u64,
    content: Content,
    spans: HashMap<String, TensorSpan>,
    file: fs::File,
}

impl std::fmt::Debug for GgufFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GgufFile").field("path", &self.path).field("tensors", &self.spans.len()).finish()
    }
}

fn invalid(path: &Path, message: impl Into<String>) -> ModelError {
    ModelError::Invalid { path: path.into(), message: message.into() }
}

/// The counts a model's metadata gives (`(key, value, bound)`: widths, layers, heads...), each at least 1 and at
/// most its bound, so that a damaged file cannot size a buffer; the error names the first that is not.
pub fn check_counts(counts: &[(&str, usize, usize)]) -> Result<(), String> {
    match counts.iter().find(|(_, v, max)| *v == 0 || v > max) {
        Some((what, v, _)) => Err(format!("{what} = {v} is out of range")),
        None => Ok(()),
    }
}

/// The counts every encoder graph's metadata gives, bounded alike whatever the graph.
pub struct EncoderCounts {
    pub hidden: usize,
    pub layers: usize,
    pub heads: usize,
    pub ffn: usize,
    /// The positions the model was trained on.
    pub context: usize,
}

impl EncoderCounts {
    /// [`check_counts`] on these counts, then on the graph's own (`more`).
    pub fn check(&self, more: &[(&str, usize, usize)]) -> Result<(), String> {
        check_counts(&[
            ("embedding_length", self.hidden, 1 << 16),
            ("block_count", self.layers, 1024),
            ("head_count", self.heads, 1024),
            ("feed_forward_length", self.ffn, 1 << 18),
            ("context_length", self.context, 1 << 20),
        ])?;
        check_counts(more)
    }
}

impl GgufFile {
    /// An error about this file's contents.
    pub fn invalid(&self, message: impl Into<String>) -> ModelError {
        invalid(&self.path, message)
    }

    /// Read the header (metadata and tensor table) and check every tensor against the file.
    pub fn open(path: &Path) -> Result<Self, ModelError> {
        let read_err = |e: std::io::Error| ModelError::Read { path: path.into(), message: e.to_string() };
        let mut file = fs::File::open(path).map_err(read_err)?;
        let size = file.metadata().map_err(read_err)?.len();
        // candle's reader bounds counts, strings and arrays by the file's size; a few inputs still reach a panic
        // inside it (an alignment of zero divides by zero), which is turned into this file's error.
        let content = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| Content::read(&mut file)))
            .map_err(|_| invalid(path, "not a valid GGUF file (its header could not be read)"))?
            .map_err(|e| invalid(path, format!("not a valid GGUF file: {e}")))?;
        if content.tensor_data_offset > size {
            return Err(invalid(path, "tensor data would start past the end of the file"));
        }
        let mut spans = HashMap::with_capacity(content.tensor_infos.len());
        for (name, info) in &content.tensor_infos {
            let bad = |what: &str| invalid(path, format!("tensor `{name}`: {what}"));
            let dims = info.shape.dims().to_vec();
            let elems = dims.iter().try_fold(1usize, |acc, d| acc.checked_mul(*d)).ok_or_else(|| bad("shape too large"))?;
            let block = info.ggml_dtype.block_size();
            if block == 0 || !elems.is_multiple_of(block) {
                return Err(bad(&format!("{elems} values are not whole blocks of {block}")));
            }
            let bytes = ((elems / block) as u64).checked_mul(info.ggml_dtype.type_size() as u64).ok_or_else(|| bad("size too large"))?;
            let start = content.tensor_data_offset.checked_add(info.offset).ok_or_else(|| bad("offset too large"))?;
            let end = start.checked_add(bytes).ok_or_else(|| bad("offset too large"))?;
            if end > size {
                return Err(bad(&format!("its {bytes} bytes at offset {start} run past the end of the file ({size} bytes)")));
            }
            spans.insert(name.clone(), TensorSpan { dtype: info.ggml_dtype, dims, start, bytes });
        }
        Ok(GgufFile { path: path.into(), size, content, spans, file })
    }

    pub fn metadata(&self) -> &HashMap<String, Value> {
        &self.content.metadata
    }

    pub fn architecture(&self) -> Result<&str, ModelError> {
        self.string("general.architecture")
    }

    fn get(&self, key: &str) -> Result<&Value, ModelError> {
        self.content.metadata.get(key).ok_or_else(|| invalid(&self.path, format!("no `{key}` in the file's metadata")))
    }

    pub fn has(&self, key: &str) -> bool {
        self.content.metadata.contains_key(key)
    }

    /// An unsigned integer of any width.
    pub fn usize(&self, key: &str) -> Result<usize, ModelError> {
        let v = self.get(key)?;
        let n: Option<u64> = match v {
            Value::U8(x) => Some(*x as u64),
            Value::U16(x) => Some(*x as u64),
            Value::U32(x) => Some(*x as u64),
            Value::U64(x) => Some(*x),
            Value::I8(x) => u64::try_from(*x).ok(),
            Value::I16(x) => u64::try_from(*x).ok(),
            Value::I32(x) => u64::try_from(*x).ok(),
            Value::I64(x) => u64::try_from(*x).ok(),
            _ => None,
        };
        n.and_then(|n| usize::try_from(n).ok()).ok_or_else(|| invalid(&self.path, format!("`{key}` is not a count: {v:?}")))
    }

    pub fn usize_or(&self, key: &str, default: usize) -> Result<usize, ModelError> {
        if self.has(key) {
            self.usize(key)
        } else {
            Ok(default)
        }
    }

    pub fn f32(&self, key: &str) -> Result<f32, ModelError> {
        match self.get(key)? {
            Value::F32(x) => Ok(*x),
            Value::F64(x) => Ok(*x as f32),
            v => Err(invalid(&self.path, format!("`{key}` is not a number: {v:?}"))),
        }
    }

    pub fn f32_or(&self, key: &str, default: f32) -> Result<f32, ModelError> {
        if self.has(key) {
            self.f32(key)
        } else {
            Ok(default)
        }
    }

    pub fn bool_or(&self, key: &str, default: bool) -> Result<bool, ModelError> {
        match self.content.metadata.get(key) {
            None => Ok(default),
            Some(Value::Bool(b)) => Ok(*b),
            Some(v) => Err(invalid(&self.path, format!("`{key}` is not a boolean: {v:?}"))),
        }
    }

    pub fn string(&self, key: &str) -> Result<&str, ModelError> {
        match self.get(key)? {
            Value::String(s) => Ok(s),
            v => Err(invalid(&self.path, format!("`{key}` is not a string: {v:?}"))),
        }
    }

    pub fn array(&self, key: &str) -> Result<&[Value], ModelError> {
        match self.get(key)? {
            Value::Array(a) => Ok(a),
            _ => Err(invalid(&self.path, format!("`{key}` is not an array"))),
        }
    }

    pub fn span(&self, name: &str) -> Result<&TensorSpan, ModelError> {
        self.spans.get(name).ok_or_else(|| invalid(&self.path, format!("no tensor `{name}`")))
    }

    pub fn has_tensor(&self, name: &str) -> bool {
        self.spans.contains_key(name)
    }

    fn read_bytes(&self, start: u64, len: u64) -> Result<Vec<u8>, ModelError> {
        let len = usize::try_from(len).map_err(|_| invalid(&self.path, "tensor too large"))?;
        let mut buf = vec![0u8; len];
        crate::safetensors::read_exact_at(&self.file, &mut buf, start)
            .map_err(|e| ModelError::Read { path: self.path.clone(), message: e.to_string() })?;
        Ok(buf)
    }

    /// Tensor `name` as stored (quantized or float), of the expected row-major dimensions.
    pub fn qtensor(&self, name: &str, dims: &[usize]) -> Result<QTensor, ModelError> {
        let span = self.span(name)?;
        if span.dims != dims {
            return Err(invalid(&self.path, format!("tensor `{name}` is {:?}, expected {dims:?}", span.dims)));
        }
        let bytes = self.read_bytes(span.start, span.bytes)?;
        ggml_file::qtensor_from_ggml(span.dtype, &bytes, span.dims.clone(), &Device::Cpu)
            .map_err(|e| invalid(&self.path, format!("tensor `{name}`: {e}")))
    }

    /// Tensor `name` as f32 values.
    pub fn tensor(&self, name: &str, dims: &[usize]) -> Result<Tensor, ModelError> {
        self.qtensor(name, dims)?.dequantize(&Device::Cpu).map_err(|e| invalid(&self.path, format!("tensor `{name}`: {e}")))
    }

    /// A 2-D table whose rows are read on demand (the token embeddings).
    pub fn rows(&self, name: &str, rows: usize, width: usize) -> Result<EmbeddingRows, ModelError> {
        let span = self.span(name)?.clone();
        if span.dims != [rows, width] {
            return Err(invalid(&self.path, format!("tensor `{name}` is {:?}, expected [{rows}, {width}]", span.dims)));
        }
        if !width.is_multiple_of(span.dtype.block_size()) {
            return Err(invalid(&self.path, format!("tensor `{name}`: rows of {width} are not whole blocks")));
        }
        let file = self.file.try_clone().map_err(|e| ModelError::Read { path: self.path.clone(), message: e.to_string() })?;
        let row_bytes = width / span.dtype.block_size() * span.dtype.type_size();
        Ok(EmbeddingRows { file, path: self.path.clone(), span, rows, width, row_bytes })
    }

    /// SHA-256 of the whole file: the model's identity (a changed file is another model, the same bytes the same).
    pub fn digest(&self) -> Result<String, ModelError> {
        file_digest(&self.path)
    }
}

/// SHA-256 of a file, remembered per (path, size, modification time, inode) for the life of the process: a
/// provider opened again on the same file (every search of a one-shot CLI opens one) hashes it once.
pub fn file_digest(path: &Path) -> Result<String, ModelError> {
    use std::sync::Mutex;
    /// (path, size, modification time, inode, digest)
    type Seen = (PathBuf, u64, std::time::SystemTime, u64, String);
    static SEEN: Mutex<Vec<Seen>> = Mutex::new(Vec::new());
    let read_err = |e: std::io::Error| ModelError::Read { path: path.into(), message: e.to_string() };
    let meta = fs::metadata(path).map_err(read_err)?;
    let mtime = meta.modified().map_err(read_err)?;
    #[cfg(unix)]
    let inode = std::os::unix::fs::MetadataExt::ino(&meta);
    #[cfg(not(unix))]
    let inode = 0u64;
    let key = (path.to_path_buf(), meta.len(), mtime, inode);
    if let Ok(seen) = SEEN.lock() {
        if let Some(d) = seen.iter().find(|s| (&s.0, s.1, s.2, s.3) == (&key.0, key.1, key.2, key.3)) {
            return Ok(d.4.clone());
        }
    }
    let mut f = fs::File::open(path).map_err(read_err)?;
    let mut hasher = sha2::Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = f.read(&mut buf).map_err(read_err)?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    let digest = hex::encode(hasher.finalize());
    // A holder that panicked left the list whole (a push is the only write): it is used as it is.
    SEEN.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push((key.0, key.1, key.2, key.3, digest.clone()));
    Ok(digest)
}

/// Rows of a stored table, read by positioned reads and dequantized as tokens need them (any GGUF type candle
/// reads: each row is whole blocks).
pub struct EmbeddingRows {
    file: fs::File,
    path: PathBuf,
    span: TensorSpan,
    pub rows: usize,
    pub width: usize,
    row_bytes: usize,
}

impl EmbeddingRows {
    /// `(ids.len(), width)` f32 rows.
    pub fn gather(&self, ids: &[u32]) -> candle_core::Result<Tensor> {
        let mut bytes = vec![0u8; ids.len() * self.row_bytes];
        let mut seen: HashMap<u32, usize> = HashMap::new();
        for (i, &id) in ids.iter().enumerate() {
            if id as usize >= self.rows {
                candle_core::bail!("token id {id} outside the {} token embeddings", self.rows);
            }
            let dst = i * self.row_bytes;
            if let Some(&src) = seen.get(&id) {
                bytes.copy_within(src..src + self.row_bytes, dst);
                continue;
            }
            crate::safetensors::read_exact_at(&self.file, &mut bytes[dst..dst + self.row_bytes], self.span.start + id as u64 * self.row_bytes as u64)
                .map_err(|e| candle_core::Error::Msg(format!("reading token embeddings from {}: {e}", self.path.display())))?;
            seen.insert(id, dst);
        }
        ggml_file::qtensor_from_ggml(self.span.dtype, &bytes, vec![ids.len(), self.width], &Device::Cpu)?.dequantize(&Device::Cpu)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A minimal GGUF v3 file: `kvs` then `tensors` (name, dims innermost first, type, offset), data `data`.
    pub(crate) fn gguf_bytes(kvs: &[(&str, u32, Vec<u8>)], tensors: &[(&str, Vec<u64>, u32, u64)], data: &[u8]) -> Vec<u8> {
        let mut b = b"GGUF".to_vec();
        b.extend(3u32.to_le_bytes());
        b.extend((tensors.len() as u64).to_le_bytes());
        b.extend((kvs.len() as u64).to_le_bytes());
        let s = |b: &mut Vec<u8>, t: &str| {
            b.extend((t.len() as u64).to_le_bytes());
            b.extend(t.as_bytes());
        };
        for (k, ty, v) in kvs {
            s(&mut b, k);
            b.extend(ty.to_le_bytes());
            b.extend(v);
        }
        for (name, dims, ty, off) in tensors {
            s(&mut b, name);
            b.extend((dims.len() as u32).to_le_bytes());
            for d in dims {
                b.extend(d.to_le_bytes());
            }
            b.extend(ty.to_le_bytes());
            b.extend(off.to_le_bytes());
        }
        while !b.len().is_multiple_of(32) {
            b.push(0);
        }
        b.extend(data);
        b
    }

    fn string_value(s: &str) -> Vec<u8> {
        let mut v = (s.len() as u64).to_le_bytes().to_vec();
        v.extend(s.as_bytes());
        v
    }

    fn write(bytes: &[u8]) -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.gguf");
        fs::write(&path, bytes).unwrap();
        (dir, path)
    }

    #[test]
    fn reads_metadata_tensors_and_rows() {
        // A 3x4 F32 table and the architecture name.
        let data: Vec<u8> = (0..12).flat_map(|i| (i as f32).to_le_bytes()).collect();
        let bytes = gguf_bytes(&[("general.architecture", 8, string_value("gemma-embedding"))], &[("t", vec![4, 3], 0, 0)], &data);
        let (_d, path) = write(&bytes);
        assert!(is_gguf(&path));
        let g = GgufFile::open(&path).unwrap();
        assert_eq!(g.architecture().unwrap(), "gemma-embedding");
        assert_eq!(g.span("t").unwrap().dims, vec![3, 4]);
        let t: Vec<Vec<f32>> = g.tensor("t", &[3, 4]).unwrap().to_vec2().unwrap();
        assert_eq!(t[2], vec![8.0, 9.0, 10.0, 11.0]);
        let rows = g.rows("t", 3, 4).unwrap();
        let r: Vec<Vec<f32>> = rows.gather(&[2, 0, 2]).unwrap().to_vec2().unwrap();
        assert_eq!(r, vec![vec![8.0, 9.0, 10.0, 11.0], vec![0.0, 1.0, 2.0, 3.0], vec![8.0, 9.0, 10.0, 11.0]]);
        assert!(rows.gather(&[3]).is_err(), "a row past the table is an error");
        assert!(g.tensor("t", &[4, 3]).is_err(), "an unexpected shape is an error");
        assert_eq!(g.digest().unwrap(), crate::sha256_hex(&bytes));
    }

    #[test]
    fn hostile_files_are_errors_not_panics_or_huge_allocations() {
        let data = vec![0u8; 48];
        let cases: Vec<(&str, Vec<u8>)> = vec![
            ("not gguf", b"GGUX0000".to_vec()),
            ("truncated header", b"GGUF\x03\x00\x00\x00".to_vec()),
            ("absurd tensor count", {
                let mut b = b"GGUF".to_vec();
                b.extend(3u32.to_le_bytes());
                b.extend(u64::MAX.to_le_bytes());
                b.extend(0u64.to_le_bytes());
                b
            }),
            ("huge string", {
                let mut b = b"GGUF".to_vec();
                b.extend(3u32.to_le_bytes());
                b.extend(0u64.to_le_bytes());
                b.extend(1u64.to_le_bytes());
                b.extend((1u64 << 40).to_le_bytes());
                b
            }),
            ("offset past the end", gguf_bytes(&[], &[("t", vec![4, 3], 0, 1 << 30)], &data)),
            ("data past the end", gguf_bytes(&[], &[("t", vec![4, 4], 0, 0)], &data)),
            ("overflowing shape", gguf_bytes(&[], &[("t", vec![u64::MAX / 2, 4], 0, 0)], &data)),
            ("partial block", gguf_bytes(&[], &[("t", vec![31], 8, 0)], &data)),
            ("zero alignment", gguf_bytes(&[("general.alignment", 4, 0u32.to_le_bytes().to_vec())], &[], &data)),
        ];
        for (what, bytes) in cases {
            let (_d, path) = write(&bytes);
            let err = GgufFile::open(&path).expect_err(what);
            assert!(matches!(err, ModelError::Invalid { .. }), "{what}: {err}");
        }
    }
}
