//! The test data the checks write: files, chunks, queries, identities and unit vectors, and the reads that
//! turn a store's answers into comparable sets. Shared by every check, so apart from any one of them.

use std::collections::BTreeSet;

use memory_core::identity::IndexIdentity;
use memory_core::store::{ChunkRecord, ChunkStore, FileRecord, KeywordQuery, SyncBatch};
use memory_core::Source;

use super::step;

pub(super) fn record(source: Source, path: &str, content: &str, mtime_ms: i64) -> FileRecord {
    FileRecord { source, path: path.into(), hash: memory_core::sha256_hex(content.as_bytes()), size: content.len() as u64, mtime_ms }
}

pub(super) fn chunk(source: Source, path: &str, start_line: usize, text: &str, embedding: Option<Vec<f32>>) -> ChunkRecord {
    ChunkRecord {
        id: format!("{}:{path}:{start_line}", source.as_str()),
        source,
        path: path.into(),
        start_line,
        end_line: start_line + 1,
        text: text.into(),
        hash: memory_core::sha256_hex(text.as_bytes()),
        terms: memory_core::analysis::document_terms_joined(text),
        heading_terms: String::new(),
        importance: None,
        date: None,
        embedding,
    }
}

/// A file of one chunk per text, two lines apart.
pub(super) fn file(source: Source, path: &str, texts: &[&str], mtime_ms: i64) -> (FileRecord, Vec<ChunkRecord>) {
    let chunks = texts.iter().enumerate().map(|(i, t)| chunk(source, path, 1 + 2 * i, t, None)).collect();
    (record(source, path, &texts.join("\n"), mtime_ms), chunks)
}

pub(super) fn upserts(files: Vec<(FileRecord, Vec<ChunkRecord>)>) -> SyncBatch {
    SyncBatch { upserts: files, ..Default::default() }
}

pub(super) fn query(text: &str) -> KeywordQuery {
    KeywordQuery { terms: memory_core::analysis::query_terms(text) }
}

pub(super) fn identity(dimensions: Option<usize>) -> IndexIdentity {
    IndexIdentity {
        schema: memory_core::indexed::SCHEMA_VERSION,
        provider: dimensions.map(|_| "contract".into()),
        model: dimensions.map(|_| "unit-vectors".into()),
        provider_fingerprint: dimensions.map(|d| format!("contract-{d}")),
        dimensions,
        sources: vec!["memory".into(), "sessions".into()],
        extra_paths: Vec::new(),
        chunk_tokens: 400,
        chunk_overlap: 80,
        chunker: "contract".into(),
        tokenizer: "contract".into(),
    }
}

/// Unit vector along axis `i` of `dims`.
pub(super) fn axis(i: usize, dims: usize) -> Vec<f32> {
    let mut v = vec![0f32; dims];
    v[i] = 1.0;
    v
}

pub(super) async fn paths(store: &dyn ChunkStore) -> std::result::Result<BTreeSet<String>, String> {
    Ok(step("files()", store.files().await)?.into_iter().map(|f| f.path).collect())
}

pub(super) fn set(items: &[&str]) -> BTreeSet<String> {
    items.iter().map(std::string::ToString::to_string).collect()
}

pub(super) async fn chunk_texts(store: &dyn ChunkStore, source: Source, path: &str) -> std::result::Result<Vec<String>, String> {
    Ok(step("file_chunks()", store.file_chunks(source, path, 100).await)?.into_iter().map(|c| c.text).collect())
}
