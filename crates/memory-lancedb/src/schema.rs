//! Arrow schemas of the tables and conversions between rows and the store's records.
//!
//! One data table per index generation holds both chunk rows (`kind = 'chunk'`) and file rows
//! (`kind = 'file'`), so that replacing a file's chunks and updating its record is one commit.

use std::sync::Arc;

use arrow_array::builder::{Float32Builder, Int32Builder, Int64Builder, ListBuilder, StringBuilder};
use arrow_array::{
    Array, ArrayRef, FixedSizeListArray, Float32Array, Int32Array, Int64Array, ListArray, RecordBatch, StringArray,
};
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use memory_core::store::{Candidate, ChunkRecord, FileRecord};
use memory_core::{MemoryError, Result, Source};

use crate::error::arrow_err;

pub(crate) const KIND_CHUNK: &str = "chunk";
pub(crate) const KIND_FILE: &str = "file";

pub(crate) const COL_ID: &str = "id";
pub(crate) const COL_KIND: &str = "kind";
pub(crate) const COL_SOURCE: &str = "source";
pub(crate) const COL_PATH: &str = "path";
pub(crate) const COL_START: &str = "start_line";
pub(crate) const COL_END: &str = "end_line";
pub(crate) const COL_HASH: &str = "hash";
pub(crate) const COL_TEXT: &str = "text";
pub(crate) const COL_TERMS: &str = "terms";
pub(crate) const COL_HEADING: &str = "heading_terms";
pub(crate) const COL_IMPORTANCE: &str = "importance";
pub(crate) const COL_SIZE: &str = "size";
pub(crate) const COL_MTIME: &str = "mtime_ms";
pub(crate) const COL_VECTOR: &str = "vector";

/// Columns a [`Candidate`] is built from.
pub(crate) const CANDIDATE_COLUMNS: &[&str] =
    &[COL_ID, COL_SOURCE, COL_PATH, COL_START, COL_END, COL_TEXT, COL_IMPORTANCE, COL_MTIME];

pub(crate) fn vector_field(dims: usize) -> Field {
    Field::new(COL_VECTOR, DataType::FixedSizeList(Arc::new(Field::new("item", DataType::Float32, true)), dims as i32), true)
}

/// Schema of the data table; `dims` is `None` for keyword-only indexes (no vector column).
pub(crate) fn data_schema(dims: Option<usize>) -> SchemaRef {
    let mut fields = vec![
        // The primary key lets Lance detect two writers inserting the same chunk concurrently (two hosts).
        Field::new(COL_ID, DataType::Utf8, false).with_metadata(
            [("lance-schema:unenforced-primary-key".to_string(), "true".to_string())].into_iter().collect(),
        ),
        Field::new(COL_KIND, DataType::Utf8, false),
        Field::new(COL_SOURCE, DataType::Utf8, false),
        Field::new(COL_PATH, DataType::Utf8, false),
        Field::new(COL_START, DataType::Int64, false),
        Field::new(COL_END, DataType::Int64, false),
        Field::new(COL_HASH, DataType::Utf8, false),
        Field::new(COL_TEXT, DataType::Utf8, false),
        Field::new(COL_TERMS, DataType::Utf8, false),
        Field::new(COL_HEADING, DataType::Utf8, false),
        Field::new(COL_IMPORTANCE, DataType::Int32, true),
        Field::new(COL_SIZE, DataType::Int64, false),
        Field::new(COL_MTIME, DataType::Int64, false),
    ];
    if let Some(d) = dims {
        fields.push(vector_field(d));
    }
    Arc::new(Schema::new(fields))
}

/// Width of the vector column of a data-table schema, if it has one.
pub(crate) fn vector_dims(schema: &Schema) -> Option<usize> {
    match schema.field_with_name(COL_VECTOR).ok()?.data_type() {
        DataType::FixedSizeList(_, n) => Some(*n as usize),
        _ => None,
    }
}

pub(crate) fn meta_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![Field::new("key", DataType::Utf8, false), Field::new("value", DataType::Utf8, false)]))
}

pub(crate) fn cache_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("id", DataType::Utf8, false),
        Field::new("key", DataType::Utf8, false),
        Field::new("hash", DataType::Utf8, false),
        Field::new("vector", DataType::List(Arc::new(Field::new("item", DataType::Float32, true))), false),
        Field::new("created_ms", DataType::Int64, false),
    ]))
}

pub(crate) fn file_row_id(source: Source, path: &str) -> String {
    format!("file:{}:{path}", source.as_str())
}

/// A row of the data table before it becomes Arrow columns.
pub(crate) struct Row<'a> {
    pub id: std::borrow::Cow<'a, str>,
    pub kind: &'static str,
    pub source: Source,
    pub path: &'a str,
    pub start: i64,
    pub end: i64,
    pub hash: &'a str,
    pub text: &'a str,
    pub terms: &'a str,
    pub heading: &'a str,
    pub importance: Option<i32>,
    pub size: i64,
    pub mtime: i64,
    pub vector: Option<&'a [f32]>,
}

impl<'a> Row<'a> {
    pub fn file(f: &'a FileRecord) -> Row<'a> {
        Row {
            id: file_row_id(f.source, &f.path).into(),
            kind: KIND_FILE,
            source: f.source,
            path: &f.path,
            start: 0,
            end: 0,
            hash: &f.hash,
            text: "",
            terms: "",
            heading: "",
            importance: None,
            size: f.size as i64,
            mtime: f.mtime_ms,
            vector: None,
        }
    }

    pub fn chunk(c: &'a ChunkRecord, file: &'a FileRecord) -> Row<'a> {
        Row {
            id: c.id.as_str().into(),
            kind: KIND_CHUNK,
            source: c.source,
            path: &c.path,
            start: c.start_line as i64,
            end: c.end_line as i64,
            hash: &c.hash,
            text: &c.text,
            terms: &c.terms,
            heading: &c.heading_terms,
            importance: c.importance.map(i32::from),
            size: 0,
            mtime: file.mtime_ms,
            vector: c.embedding.as_deref(),
        }
    }
}

/// Rows to a batch of `schema` (the table's own schema, with or without a vector column).
pub(crate) fn rows_to_batch(schema: &SchemaRef, rows: &[Row<'_>]) -> Result<RecordBatch> {
    let n = rows.len();
    let mut id = StringBuilder::with_capacity(n, n * 40);
    let mut kind = StringBuilder::with_capacity(n, n * 5);
    let mut source = StringBuilder::with_capacity(n, n * 8);
    let mut path = StringBuilder::with_capacity(n, n * 24);
    let mut start = Int64Builder::with_capacity(n);
    let mut end = Int64Builder::with_capacity(n);
    let mut hash = StringBuilder::with_capacity(n, n * 64);
    let mut text = StringBuilder::new();
    let mut terms = StringBuilder::new();
    let mut heading = StringBuilder::new();
    let mut importance = Int32Builder::with_capacity(n);
    let mut size = Int64Builder::with_capacity(n);
    let mut mtime = Int64Builder::with_capacity(n);
    for r in rows {
        id.append_value(&r.id);
        kind.append_value(r.kind);
        source.append_value(r.source.as_str());
        path.append_value(r.path);
        start.append_value(r.start);
        end.append_value(r.end);
        hash.append_value(r.hash);
        text.append_value(r.text);
        terms.append_value(r.terms);
        heading.append_value(r.heading);
        importance.append_option(r.importance);
        size.append_value(r.size);
        mtime.append_value(r.mtime);
    }
    let mut columns: Vec<ArrayRef> = vec![
        Arc::new(id.finish()),
        Arc::new(kind.finish()),
        Arc::new(source.finish()),
        Arc::new(path.finish()),
        Arc::new(start.finish()),
        Arc::new(end.finish()),
        Arc::new(hash.finish()),
        Arc::new(text.finish()),
        Arc::new(terms.finish()),
        Arc::new(heading.finish()),
        Arc::new(importance.finish()),
        Arc::new(size.finish()),
        Arc::new(mtime.finish()),
    ];
    if let Ok(field) = schema.field_with_name(COL_VECTOR) {
        let DataType::FixedSizeList(item, dims) = field.data_type() else {
            return Err(MemoryError::CorruptIndex(format!("lancedb: vector column has type {}", field.data_type())));
        };
        let d = *dims as usize;
        let mut values = Vec::with_capacity(n * d);
        let mut valid = Vec::with_capacity(n);
        for r in rows {
            match r.vector {
                Some(v) if v.len() == d => {
                    values.extend_from_slice(v);
                    valid.push(true);
                }
                Some(v) => {
                    return Err(MemoryError::InvalidInput(format!(
                        "embedding has {} dimensions but the index stores {d}; rebuild the index",
                        v.len()
                    )))
                }
                None => {
                    values.extend(std::iter::repeat_n(0.0f32, d));
                    valid.push(false);
                }
            }
        }
        let nulls = if valid.iter().all(|v| *v) { None } else { Some(valid.into()) };
        let list = FixedSizeListArray::try_new(item.clone(), *dims, Arc::new(Float32Array::from(values)), nulls)
            .map_err(|e| arrow_err("building the vector column", e))?;
        columns.push(Arc::new(list));
    }
    RecordBatch::try_new(schema.clone(), columns).map_err(|e| arrow_err("building a batch", e))
}

pub(crate) fn meta_batch(key: &str, value: &str) -> Result<RecordBatch> {
    RecordBatch::try_new(
        meta_schema(),
        vec![Arc::new(StringArray::from(vec![key])), Arc::new(StringArray::from(vec![value]))],
    )
    .map_err(|e| arrow_err("building a meta row", e))
}

pub(crate) fn cache_batch(key: &str, entries: &[(String, Vec<f32>)], now_ms: i64) -> Result<RecordBatch> {
    let mut ids = StringBuilder::new();
    let mut keys = StringBuilder::new();
    let mut hashes = StringBuilder::new();
    let mut vectors = ListBuilder::new(Float32Builder::new());
    let mut created = Int64Builder::new();
    for (hash, v) in entries {
        ids.append_value(cache_row_id(key, hash));
        keys.append_value(key);
        hashes.append_value(hash);
        vectors.values().append_slice(v);
        vectors.append(true);
        created.append_value(now_ms);
    }
    RecordBatch::try_new(
        cache_schema(),
        vec![
            Arc::new(ids.finish()),
            Arc::new(keys.finish()),
            Arc::new(hashes.finish()),
            Arc::new(vectors.finish()),
            Arc::new(created.finish()),
        ],
    )
    .map_err(|e| arrow_err("building cache rows", e))
}

pub(crate) fn cache_row_id(key: &str, hash: &str) -> String {
    format!("{key}:{hash}")
}

// ---- reading ----

pub(crate) fn col<'b, T: 'static>(batch: &'b RecordBatch, name: &str) -> Result<&'b T> {
    batch
        .column_by_name(name)
        .and_then(|c| c.as_any().downcast_ref::<T>())
        .ok_or_else(|| MemoryError::CorruptIndex(format!("lancedb: column `{name}` missing or of an unexpected type")))
}

fn opt_col<'b, T: 'static>(batch: &'b RecordBatch, name: &str) -> Option<&'b T> {
    batch.column_by_name(name).and_then(|c| c.as_any().downcast_ref::<T>())
}

fn parse_source(s: &str) -> Result<Source> {
    Source::parse(s).ok_or_else(|| MemoryError::CorruptIndex(format!("lancedb: unknown source `{s}`")))
}

/// Candidates from batches selected with [`CANDIDATE_COLUMNS`] plus `_score` (FTS) or `_distance` (vector).
pub(crate) fn batches_to_candidates(batches: &[RecordBatch]) -> Result<Vec<Candidate>> {
    let mut out = Vec::new();
    for b in batches {
        let id = col::<StringArray>(b, COL_ID)?;
        let source = col::<StringArray>(b, COL_SOURCE)?;
        let path = col::<StringArray>(b, COL_PATH)?;
        let start = col::<Int64Array>(b, COL_START)?;
        let end = col::<Int64Array>(b, COL_END)?;
        let text = col::<StringArray>(b, COL_TEXT)?;
        let importance = col::<Int32Array>(b, COL_IMPORTANCE)?;
        let mtime = col::<Int64Array>(b, COL_MTIME)?;
        let score = opt_col::<Float32Array>(b, "_score");
        let distance = opt_col::<Float32Array>(b, "_distance");
        for i in 0..b.num_rows() {
            let vector_score = match distance {
                Some(d) if d.is_valid(i) && d.value(i).is_finite() => Some(1.0 - d.value(i) as f64),
                Some(_) => continue, // a row without a usable vector
                None => None,
            };
            out.push(Candidate {
                chunk_id: id.value(i).to_string(),
                source: parse_source(source.value(i))?,
                path: path.value(i).to_string(),
                start_line: start.value(i).max(0) as usize,
                end_line: end.value(i).max(0) as usize,
                text: text.value(i).to_string(),
                importance: importance.is_valid(i).then(|| importance.value(i).clamp(0, 255) as u8),
                file_mtime_ms: mtime.value(i),
                bm25_rank: score.filter(|s| s.is_valid(i)).map(|s| -(s.value(i) as f64)),
                vector_score,
            });
        }
    }
    Ok(out)
}

pub(crate) const FILE_COLUMNS: &[&str] = &[COL_SOURCE, COL_PATH, COL_HASH, COL_SIZE, COL_MTIME];

pub(crate) fn batches_to_files(batches: &[RecordBatch]) -> Result<Vec<FileRecord>> {
    let mut out = Vec::new();
    for b in batches {
        let source = col::<StringArray>(b, COL_SOURCE)?;
        let path = col::<StringArray>(b, COL_PATH)?;
        let hash = col::<StringArray>(b, COL_HASH)?;
        let size = col::<Int64Array>(b, COL_SIZE)?;
        let mtime = col::<Int64Array>(b, COL_MTIME)?;
        for i in 0..b.num_rows() {
            out.push(FileRecord {
                source: parse_source(source.value(i))?,
                path: path.value(i).to_string(),
                hash: hash.value(i).to_string(),
                size: size.value(i).max(0) as u64,
                mtime_ms: mtime.value(i),
            });
        }
    }
    Ok(out)
}

/// `(hash, vector)` pairs from cache rows.
/// (key, vector) pairs from batches of a string `key_column` and the `vector` column; rows without a vector
/// are skipped.
pub(crate) fn batches_to_vectors(batches: &[RecordBatch], key_column: &str) -> Result<Vec<(String, Vec<f32>)>> {
    let mut out = Vec::new();
    for b in batches {
        let hash = col::<StringArray>(b, key_column)?;
        let vector = col::<ListArray>(b, "vector")?;
        for i in 0..b.num_rows() {
            if vector.is_null(i) {
                continue;
            }
            let v = vector.value(i);
            let v = v
                .as_any()
                .downcast_ref::<Float32Array>()
                .ok_or_else(|| MemoryError::CorruptIndex("lancedb: stored vector is not float32".into()))?;
            out.push((hash.value(i).to_string(), v.values().to_vec()));
        }
    }
    Ok(out)
}

/// Replace the `mtime_ms` column of data-table rows (a touched file's chunks keep their text and vectors).
pub(crate) fn with_mtime(batch: &RecordBatch, mtime: i64) -> Result<RecordBatch> {
    let schema = batch.schema();
    let idx = schema.index_of(COL_MTIME).map_err(|e| arrow_err("finding mtime", e))?;
    let mut columns: Vec<ArrayRef> = batch.columns().to_vec();
    columns[idx] = Arc::new(Int64Array::from(vec![mtime; batch.num_rows()]));
    RecordBatch::try_new(schema, columns).map_err(|e| arrow_err("replacing mtime", e))
}

/// SQL string literal with quotes doubled: the only way user-controlled text (paths) enters a filter.
pub(crate) fn sql_str(s: &str) -> String {
    format!("'{}'", s.replace('\'', "''"))
}

/// `(source = 'x' AND path IN (...)) OR ...` for a set of files.
pub(crate) fn files_filter(files: &[(Source, &str)]) -> Option<String> {
    let mut by_source: std::collections::BTreeMap<Source, Vec<&str>> = Default::default();
    for (s, p) in files {
        by_source.entry(*s).or_default().push(p);
    }
    if by_source.is_empty() {
        return None;
    }
    let parts: Vec<String> = by_source
        .into_iter()
        .map(|(s, paths)| {
            let list: Vec<String> = paths.iter().map(|p| sql_str(p)).collect();
            format!("({COL_SOURCE} = {} AND {COL_PATH} IN ({}))", sql_str(s.as_str()), list.join(", "))
        })
        .collect();
    Some(parts.join(" OR "))
}

/// `source IN (...)` for a search limited to some sources; `None` means all.
pub(crate) fn sources_filter(sources: &[Source]) -> Option<String> {
    if sources.is_empty() {
        return None;
    }
    let list: Vec<String> = sources.iter().map(|s| sql_str(s.as_str())).collect();
    Some(format!("{COL_SOURCE} IN ({})", list.join(", ")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quotes_are_doubled_in_filters() {
        assert_eq!(sql_str("it's"), "'it''s'");
        let f = files_filter(&[(Source::Memory, "a'b.md"), (Source::Memory, "c.md")]).unwrap();
        assert_eq!(f, "(source = 'memory' AND path IN ('a''b.md', 'c.md'))");
        assert!(files_filter(&[]).is_none());
        assert_eq!(sources_filter(&[Source::Sessions]).unwrap(), "source IN ('sessions')");
    }

    #[test]
    fn rows_round_trip_with_and_without_vectors() {
        let file = FileRecord { source: Source::Memory, path: "memory/a.md".into(), hash: "h".into(), size: 3, mtime_ms: 7 };
        let mut c = ChunkRecord {
            id: "c1".into(),
            source: Source::Memory,
            path: "memory/a.md".into(),
            start_line: 1,
            end_line: 2,
            text: "hello".into(),
            hash: "x".into(),
            terms: "hello".into(),
            heading_terms: String::new(),
            importance: Some(8),
            embedding: Some(vec![0.6, 0.8]),
        };
        let c2 = ChunkRecord { id: "c2".into(), embedding: None, ..c.clone() };
        let schema = data_schema(Some(2));
        let b = rows_to_batch(&schema, &[Row::file(&file), Row::chunk(&c, &file), Row::chunk(&c2, &file)]).unwrap();
        assert_eq!(b.num_rows(), 3);
        let cands = batches_to_candidates(&[b.clone()]).unwrap();
        assert_eq!(cands[1].importance, Some(8));
        assert_eq!(cands[1].file_mtime_ms, 7);
        let files = batches_to_files(&[b]).unwrap();
        assert_eq!(files[0], file);
        c.embedding = Some(vec![1.0; 3]);
        assert!(rows_to_batch(&schema, &[Row::chunk(&c, &file)]).is_err());
        let kw = rows_to_batch(&data_schema(None), &[Row::chunk(&c, &file)]).unwrap();
        assert_eq!(vector_dims(&kw.schema()), None);
    }
}
