//! Arrow schemas of the tables and conversions between rows and the store's records.
//!
//! One data table per index generation holds both chunk rows (`kind = 'chunk'`) and file rows
//! (`kind = 'file'`), so that replacing a file's chunks and updating its record is one commit.

use std::sync::Arc;

use arrow_array::builder::{Float32Builder, Int32Builder, Int64Builder, ListBuilder, StringBuilder};
use arrow_array::{Array, ArrayRef, FixedSizeListArray, Float32Array, Int32Array, Int64Array, ListArray, RecordBatch, StringArray};
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
/// The day a chunk is of (`ChunkRecord::date`), what searches within dates filter by; null when undated.
pub(crate) const COL_DATE: &str = "date";
pub(crate) const COL_SIZE: &str = "size";
pub(crate) const COL_MTIME: &str = "mtime_ms";
pub(crate) const COL_VECTOR: &str = "vector";
/// Everything a search result needs in one string: a JSON header line (id, source, path, lines, importance,
/// mtime) and the chunk text. Why one column: LanceDB reads each selected column of each hit separately, so on a
/// large table fetching eight columns per hit is most of a search's time, and one column is one read per hit.
pub(crate) const COL_CARD: &str = "card";

/// Columns a [`Candidate`] is built from, in tables with a card column.
const CARD_COLUMNS: &[&str] = &[COL_CARD];
/// ...and in tables written before it (they keep working, a little slower, until rebuilt).
const LEGACY_CANDIDATE_COLUMNS: &[&str] = &[COL_ID, COL_SOURCE, COL_PATH, COL_START, COL_END, COL_TEXT, COL_IMPORTANCE, COL_MTIME];

/// The columns to select for candidates from a table of this schema.
pub(crate) fn candidate_columns(schema: &Schema) -> &'static [&'static str] {
    if schema.field_with_name(COL_CARD).is_ok() {
        CARD_COLUMNS
    } else {
        LEGACY_CANDIDATE_COLUMNS
    }
}

pub(crate) fn vector_field(dims: usize) -> Field {
    Field::new(COL_VECTOR, DataType::FixedSizeList(Arc::new(Field::new("item", DataType::Float32, true)), dims as i32), true)
}

/// Schema of the data table; `dims` is `None` for keyword-only indexes (no vector column).
pub(crate) fn data_schema(dims: Option<usize>) -> SchemaRef {
    let mut fields = vec![
        // The primary key lets Lance detect two writers inserting the same chunk concurrently (two hosts).
        Field::new(COL_ID, DataType::Utf8, false)
            .with_metadata([("lance-schema:unenforced-primary-key".to_string(), "true".to_string())].into_iter().collect()),
        Field::new(COL_KIND, DataType::Utf8, false),
        Field::new(COL_SOURCE, DataType::Utf8, false),
        Field::new(COL_PATH, DataType::Utf8, false),
        Field::new(COL_START, DataType::Int64, false),
        Field::new(COL_END, DataType::Int64, false),
        Field::new(COL_HASH, DataType::Utf8, false),
        Field::new(COL_TERMS, DataType::Utf8, false),
        Field::new(COL_HEADING, DataType::Utf8, false),
        Field::new(COL_IMPORTANCE, DataType::Int32, true),
        Field::new(COL_DATE, DataType::Int64, true),
        Field::new(COL_SIZE, DataType::Int64, false),
        Field::new(COL_MTIME, DataType::Int64, false),
        Field::new(COL_CARD, DataType::Utf8, false),
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
    pub date: Option<i64>,
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
            date: None,
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
            date: c.date,
            size: 0,
            mtime: file.mtime_ms,
            vector: c.embedding.as_deref(),
        }
    }
}

/// Rows to a batch of `schema`: the table's own schema, with or without a vector column, and with the card
/// column or (tables written before it) a text column.
pub(crate) fn rows_to_batch(schema: &SchemaRef, rows: &[Row<'_>]) -> Result<RecordBatch> {
    let n = rows.len();
    // String columns are built from the rows' borrowed strings: no copy per value on the write path.
    fn strings<S: AsRef<str>>(values: impl Iterator<Item = S>) -> ArrayRef {
        Arc::new(StringArray::from_iter_values(values))
    }
    let ints = |f: &dyn Fn(&Row<'_>) -> i64| -> ArrayRef { Arc::new(Int64Array::from_iter_values(rows.iter().map(f))) };
    let mut columns: Vec<ArrayRef> = Vec::with_capacity(schema.fields().len());
    for field in schema.fields() {
        let column = match field.name().as_str() {
            COL_ID => strings(rows.iter().map(|r| r.id.as_ref())),
            COL_KIND => strings(rows.iter().map(|r| r.kind)),
            COL_SOURCE => strings(rows.iter().map(|r| r.source.as_str())),
            COL_PATH => strings(rows.iter().map(|r| r.path)),
            COL_START => ints(&|r| r.start),
            COL_END => ints(&|r| r.end),
            COL_HASH => strings(rows.iter().map(|r| r.hash)),
            COL_TEXT => strings(rows.iter().map(|r| r.text)),
            COL_TERMS => strings(rows.iter().map(|r| r.terms)),
            COL_HEADING => strings(rows.iter().map(|r| r.heading)),
            COL_IMPORTANCE => {
                let mut b = Int32Builder::with_capacity(n);
                for r in rows {
                    b.append_option(r.importance);
                }
                Arc::new(b.finish())
            }
            COL_DATE => Arc::new(Int64Array::from(rows.iter().map(|r| r.date).collect::<Vec<_>>())),
            COL_SIZE => ints(&|r| r.size),
            COL_MTIME => ints(&|r| r.mtime),
            COL_CARD => strings(rows.iter().map(|r| Card::of_row(r).encode(r.text))),
            COL_VECTOR => vector_column(field, rows)?,
            other => return Err(MemoryError::CorruptIndex(format!("lancedb: unexpected column `{other}` in the data table"))),
        };
        columns.push(column);
    }
    RecordBatch::try_new(schema.clone(), columns).map_err(|e| arrow_err("building a batch", e))
}

fn vector_column(field: &Field, rows: &[Row<'_>]) -> Result<ArrayRef> {
    let n = rows.len();
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
                return Err(MemoryError::InvalidInput(format!("embedding has {} dimensions but the index stores {d}; rebuild the index", v.len())))
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
    Ok(Arc::new(list))
}

/// The header of a card: what a search result needs besides the text.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub(crate) struct Card {
    id: String,
    source: String,
    path: String,
    start: i64,
    end: i64,
    importance: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    date: Option<i64>,
    mtime: i64,
}

impl Card {
    fn of_row(r: &Row<'_>) -> Card {
        Card {
            id: r.id.to_string(),
            source: r.source.as_str().to_string(),
            path: r.path.to_string(),
            start: r.start,
            end: r.end,
            importance: r.importance,
            date: r.date,
            mtime: r.mtime,
        }
    }

    /// One JSON line (JSON escapes newlines, so the first newline ends it), then the text.
    fn encode(&self, text: &str) -> String {
        let mut s = serde_json::to_string(self).expect("a card header serialises");
        s.push('\n');
        s.push_str(text);
        s
    }

    fn decode(card: &str) -> Result<(Card, &str)> {
        let (head, text) = card.split_once('\n').unwrap_or((card, ""));
        let c = serde_json::from_str(head).map_err(|e| MemoryError::CorruptIndex(format!("lancedb: unreadable card header: {e}")))?;
        Ok((c, text))
    }
}

pub(crate) fn meta_batch(key: &str, value: &str) -> Result<RecordBatch> {
    RecordBatch::try_new(meta_schema(), vec![Arc::new(StringArray::from(vec![key])), Arc::new(StringArray::from(vec![value]))])
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
        vec![Arc::new(ids.finish()), Arc::new(keys.finish()), Arc::new(hashes.finish()), Arc::new(vectors.finish()), Arc::new(created.finish())],
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

/// Candidates from batches selected with [`candidate_columns`] plus `_score` (FTS) or `_distance` (vector).
pub(crate) fn batches_to_candidates(batches: &[RecordBatch]) -> Result<Vec<Candidate>> {
    let mut out = Vec::new();
    for b in batches {
        let score = opt_col::<Float32Array>(b, "_score");
        let distance = opt_col::<Float32Array>(b, "_distance");
        let scores = |i: usize| -> Option<(Option<f64>, Option<f64>)> {
            let vector_score = match distance {
                Some(d) if d.is_valid(i) && d.value(i).is_finite() => Some(1.0 - d.value(i) as f64),
                Some(_) => return None, // a row without a usable vector
                None => None,
            };
            // `_score` is BM25 as LanceDB computes it, higher = better: `Candidate::keyword_score`'s direction.
            Some((score.filter(|s| s.is_valid(i)).map(|s| s.value(i) as f64), vector_score))
        };
        if let Some(cards) = opt_col::<StringArray>(b, COL_CARD) {
            for i in 0..b.num_rows() {
                let Some((keyword_score, vector_score)) = scores(i) else { continue };
                let (c, text) = Card::decode(cards.value(i))?;
                out.push(Candidate {
                    chunk_id: c.id,
                    source: parse_source(&c.source)?,
                    path: c.path,
                    start_line: c.start.max(0) as usize,
                    end_line: c.end.max(0) as usize,
                    text: text.to_string(),
                    importance: c.importance.map(|v| v.clamp(0, 255) as u8),
                    date: c.date,
                    file_mtime_ms: c.mtime,
                    keyword_score,
                    vector_score,
                });
            }
            continue;
        }
        let id = col::<StringArray>(b, COL_ID)?;
        let source = col::<StringArray>(b, COL_SOURCE)?;
        let path = col::<StringArray>(b, COL_PATH)?;
        let start = col::<Int64Array>(b, COL_START)?;
        let end = col::<Int64Array>(b, COL_END)?;
        let text = col::<StringArray>(b, COL_TEXT)?;
        let importance = col::<Int32Array>(b, COL_IMPORTANCE)?;
        let mtime = col::<Int64Array>(b, COL_MTIME)?;
        for i in 0..b.num_rows() {
            let Some((keyword_score, vector_score)) = scores(i) else { continue };
            out.push(Candidate {
                chunk_id: id.value(i).to_string(),
                source: parse_source(source.value(i))?,
                path: path.value(i).to_string(),
                start_line: start.value(i).max(0) as usize,
                end_line: end.value(i).max(0) as usize,
                text: text.value(i).to_string(),
                importance: importance.is_valid(i).then(|| importance.value(i).clamp(0, 255) as u8),
                // Tables written before chunks were dated are rebuilt (their identity's older chunker).
                date: None,
                file_mtime_ms: mtime.value(i),
                keyword_score,
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
        // The cache stores variable-length lists, the data table fixed-size ones (its vector index needs them).
        let vectors = b.column_by_name("vector");
        let row = |i: usize| -> Result<Option<ArrayRef>> {
            if let Some(list) = vectors.and_then(|c| c.as_any().downcast_ref::<ListArray>()) {
                return Ok((!list.is_null(i)).then(|| list.value(i)));
            }
            let list = col::<FixedSizeListArray>(b, "vector")?;
            Ok((!list.is_null(i)).then(|| list.value(i)))
        };
        for i in 0..b.num_rows() {
            let Some(v) = row(i)? else { continue };
            let v =
                v.as_any().downcast_ref::<Float32Array>().ok_or_else(|| MemoryError::CorruptIndex("lancedb: stored vector is not float32".into()))?;
            out.push((hash.value(i).to_string(), v.values().to_vec()));
        }
    }
    Ok(out)
}

/// Replace the mtime of data-table rows, in its column and in the cards (a touched file's chunks keep their
/// text and vectors).
pub(crate) fn with_mtime(batch: &RecordBatch, mtime: i64) -> Result<RecordBatch> {
    let schema = batch.schema();
    let idx = schema.index_of(COL_MTIME).map_err(|e| arrow_err("finding mtime", e))?;
    let mut columns: Vec<ArrayRef> = batch.columns().to_vec();
    columns[idx] = Arc::new(Int64Array::from(vec![mtime; batch.num_rows()]));
    if let Ok(ci) = schema.index_of(COL_CARD) {
        let cards = col::<StringArray>(batch, COL_CARD)?;
        let mut b = StringBuilder::with_capacity(batch.num_rows(), cards.value_data().len());
        for i in 0..batch.num_rows() {
            let (mut c, text) = Card::decode(cards.value(i))?;
            c.mtime = mtime;
            b.append_value(c.encode(text));
        }
        columns[ci] = Arc::new(b.finish());
    }
    RecordBatch::try_new(schema, columns).map_err(|e| arrow_err("replacing mtime", e))
}

#[cfg(test)]
mod tests {
    use super::*;

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
            date: None,
            embedding: Some(vec![0.6, 0.8]),
        };
        let c2 = ChunkRecord { id: "c2".into(), embedding: None, ..c.clone() };
        let schema = data_schema(Some(2));
        let b = rows_to_batch(&schema, &[Row::file(&file), Row::chunk(&c, &file), Row::chunk(&c2, &file)]).unwrap();
        assert_eq!(b.num_rows(), 3);
        let cands = batches_to_candidates(std::slice::from_ref(&b)).unwrap();
        assert_eq!(cands[1].importance, Some(8));
        assert_eq!(cands[1].file_mtime_ms, 7);
        let files = batches_to_files(&[b]).unwrap();
        assert_eq!(files[0], file);
        c.embedding = Some(vec![1.0; 3]);
        assert!(rows_to_batch(&schema, &[Row::chunk(&c, &file)]).is_err());
        let kw = rows_to_batch(&data_schema(None), &[Row::chunk(&c, &file)]).unwrap();
        assert_eq!(vector_dims(&kw.schema()), None);
    }

    fn chunk(text: &str) -> (FileRecord, ChunkRecord) {
        let file = FileRecord { source: Source::Memory, path: "memory/a \"b\".md".into(), hash: "h".into(), size: 3, mtime_ms: 7 };
        let c = ChunkRecord {
            id: "c1".into(),
            source: Source::Memory,
            path: file.path.clone(),
            start_line: 3,
            end_line: 9,
            text: text.into(),
            hash: "x".into(),
            terms: "t".into(),
            heading_terms: String::new(),
            importance: None,
            date: None,
            embedding: None,
        };
        (file, c)
    }

    #[test]
    fn a_card_carries_the_candidate_and_its_mtime_can_change() {
        // Text with newlines, braces and quotes: only the header's first newline splits a card.
        let (file, c) = chunk("line one {\"x\": 1}\n\nline three\n");
        let schema = data_schema(None);
        assert_eq!(candidate_columns(&schema), CARD_COLUMNS);
        let b = rows_to_batch(&schema, &[Row::chunk(&c, &file)]).unwrap();
        let only_card = b.project(&[schema.index_of(COL_CARD).unwrap()]).unwrap();
        let got = batches_to_candidates(&[only_card]).unwrap();
        assert_eq!(got.len(), 1);
        let g = &got[0];
        assert_eq!((g.chunk_id.as_str(), g.path.as_str(), g.start_line, g.end_line), ("c1", c.path.as_str(), 3, 9));
        assert_eq!((g.text.as_str(), g.importance, g.file_mtime_ms, g.source), (c.text.as_str(), None, 7, Source::Memory));
        let touched = with_mtime(&b, 99).unwrap();
        let got = batches_to_candidates(std::slice::from_ref(&touched)).unwrap();
        assert_eq!((got[0].file_mtime_ms, got[0].text.as_str()), (99, c.text.as_str()));
        assert_eq!(col::<Int64Array>(&touched, COL_MTIME).unwrap().value(0), 99);
    }

    #[test]
    fn tables_written_before_the_card_column_are_read_and_written_as_they_are() {
        let (file, c) = chunk("old text");
        let fields: Vec<Field> = data_schema(Some(2))
            .fields()
            .iter()
            .filter(|f| f.name() != COL_CARD)
            .map(|f| f.as_ref().clone())
            .chain([Field::new(COL_TEXT, DataType::Utf8, false)])
            .collect();
        let legacy: SchemaRef = Arc::new(Schema::new(fields));
        assert_eq!(candidate_columns(&legacy), LEGACY_CANDIDATE_COLUMNS);
        let b = rows_to_batch(&legacy, &[Row::chunk(&c, &file)]).unwrap();
        assert_eq!(b.schema(), legacy);
        let got = batches_to_candidates(&[with_mtime(&b, 5).unwrap()]).unwrap();
        assert_eq!((got[0].text.as_str(), got[0].file_mtime_ms, got[0].start_line), ("old text", 5, 3));
    }

    #[test]
    fn a_damaged_card_is_an_error_not_a_blank_result() {
        let schema = Arc::new(Schema::new(vec![Field::new(COL_CARD, DataType::Utf8, false)]));
        let b = RecordBatch::try_new(schema, vec![Arc::new(StringArray::from(vec!["not json\ntext"]))]).unwrap();
        assert!(matches!(batches_to_candidates(&[b]), Err(MemoryError::CorruptIndex(_))));
    }
}
