//! OpenAI's Batch API and Voyage's, which follows it:
//!
//! 1. `POST {base}/files` (multipart: `purpose=batch`, `file` = JSONL) -> `{id}`.
//!    OpenAI lines: `{custom_id, method: "POST", url: "/v1/embeddings", body: {model, input}}`;
//!    Voyage lines: `{custom_id, body: {input: [text]}}` (model and input type are set on the batch).
//! 2. `POST {base}/batches` `{input_file_id, endpoint: "/v1/embeddings", completion_window}` (`24h` OpenAI,
//!    `12h` Voyage, which also takes `request_params: {model, input_type}`) -> `{id, status}`.
//! 3. `GET {base}/batches/{id}` until `status` is final: `completed`, `failed`, `expired`, `cancelled`
//!    (`validating`, `in_progress`, `finalizing`, `cancelling` are not), with `output_file_id`, `error_file_id`,
//!    `request_counts`, `errors`.
//! 4. `GET {base}/files/{id}/content`: JSONL lines `{custom_id, response: {status_code, body: {data: [{embedding,
//!    index}]}}, error}`; the error file holds the failed lines in the same shape.

use std::sync::Arc;

use async_trait::async_trait;
use memory_core::embedding::{BatchItem, EmbeddingError};
use serde_json::{json, Value};

use super::{multipart, BatchApi, Finished};
use crate::http::join_url;
use crate::remote::{parse_json, Inner};

pub(crate) struct FilesBatch {
    inner: Arc<Inner>,
    voyage: bool,
}

impl FilesBatch {
    pub fn openai(inner: Arc<Inner>) -> Self {
        FilesBatch { inner, voyage: false }
    }

    pub fn voyage(inner: Arc<Inner>) -> Self {
        FilesBatch { inner, voyage: true }
    }

    fn url(&self, path: &str) -> String {
        join_url(&self.inner.base_url, path)
    }

    fn line(&self, item: &BatchItem) -> Value {
        if self.voyage {
            json!({ "custom_id": item.hash, "body": { "input": [item.text] } })
        } else {
            json!({
                "custom_id": item.hash,
                "method": "POST",
                "url": "/v1/embeddings",
                "body": { "model": self.inner.model, "input": item.text },
            })
        }
    }

    async fn get_json(&self, url: &str) -> Result<Value, EmbeddingError> {
        let bytes = self.get_bytes(url).await?;
        parse_json(&bytes).map_err(|e| self.inner.permanent(format!("malformed response from {url}: {e}")))
    }

    async fn get_bytes(&self, url: &str) -> Result<Vec<u8>, EmbeddingError> {
        match self.inner.http.get(url).await? {
            Ok(bytes) => Ok(bytes),
            Err(status) => Err(self.inner.status_error(status)),
        }
    }

    /// Read an output or error file into `fin`.
    fn read_lines(&self, text: &str, fin: &mut Finished) {
        for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
            let Ok(v) = parse_json(line.as_bytes()) else {
                fin.rejected.push((String::new(), format!("unparsable output line: {}", crate::http::truncate(line, 80))));
                continue;
            };
            let Some(id) = v.get("custom_id").and_then(Value::as_str).map(str::to_string) else { continue };
            let response = v.get("response").filter(|r| !r.is_null());
            let status = response.and_then(|r| r.get("status_code")).and_then(Value::as_u64).unwrap_or(200);
            let body = response.map(|r| r.get("body").unwrap_or(r));
            let error = v.get("error").filter(|e| !e.is_null());
            if let Some(e) = error {
                fin.rejected.push((id, error_text(e)));
                continue;
            }
            if status != 200 {
                let why = body.and_then(|b| b.get("error")).map(error_text).unwrap_or_else(|| format!("HTTP {status}"));
                fin.rejected.push((id, why));
                continue;
            }
            let values = body
                .and_then(|b| b.get("data"))
                .and_then(Value::as_array)
                .and_then(|d| d.first())
                .and_then(|d| d.get("embedding"));
            match values.map(|v| self.inner.floats(v)) {
                Some(Ok(vector)) => fin.vectors.push((id, vector)),
                Some(Err(e)) => fin.rejected.push((id, e.to_string())),
                None => fin.rejected.push((id, "no embedding in the output line".into())),
            }
        }
    }
}

fn error_text(e: &Value) -> String {
    match e {
        Value::String(s) => s.clone(),
        _ => e.get("message").and_then(Value::as_str).map(str::to_string).unwrap_or_else(|| e.to_string()),
    }
}

#[async_trait]
impl BatchApi for FilesBatch {
    async fn submit(&self, items: &[BatchItem]) -> Result<String, EmbeddingError> {
        let mut jsonl = Vec::new();
        for item in items {
            serde_json::to_writer(&mut jsonl, &self.line(item)).map_err(|e| self.inner.permanent(e.to_string()))?;
            jsonl.push(b'\n');
        }
        let (content_type, body) = multipart(&[("purpose", "batch")], "file", "memory-embeddings.jsonl", "application/jsonl", &jsonl);
        let file = match self.inner.http.send(reqwest::Method::POST, &self.url("files"), Some((content_type, body))).await? {
            Ok(bytes) => parse_json(&bytes).map_err(|e| self.inner.permanent(format!("malformed file upload response: {e}")))?,
            Err(status) => return Err(self.inner.status_error(status)),
        };
        let file_id = file
            .get("id")
            .and_then(Value::as_str)
            .ok_or_else(|| self.inner.permanent("file upload response has no `id`"))?;
        let mut create = json!({ "input_file_id": file_id, "endpoint": "/v1/embeddings" });
        if self.voyage {
            create["completion_window"] = json!("12h");
            create["request_params"] = json!({ "model": self.inner.model, "input_type": "document" });
        } else {
            create["completion_window"] = json!("24h");
        }
        let batch = self.inner.post(&self.url("batches"), &create).await?;
        batch
            .get("id")
            .and_then(Value::as_str)
            .map(str::to_string)
            .ok_or_else(|| self.inner.permanent("batch creation response has no `id`"))
    }

    async fn poll(&self, job_id: &str) -> Result<Option<Finished>, EmbeddingError> {
        let batch = self.get_json(&self.url(&format!("batches/{job_id}"))).await?;
        let status = batch.get("status").and_then(Value::as_str).unwrap_or("");
        let failure = match status {
            "completed" => None,
            "failed" => {
                let why = batch
                    .get("errors")
                    .and_then(|e| e.get("data"))
                    .and_then(Value::as_array)
                    .and_then(|d| d.first())
                    .map(error_text)
                    .unwrap_or_else(|| "no reason given".into());
                Some(format!("status failed: {why}"))
            }
            "expired" => Some("expired before completing (partial output kept)".to_string()),
            "cancelled" => Some("cancelled".to_string()),
            "validating" | "in_progress" | "finalizing" | "cancelling" => return Ok(None),
            other => return Err(self.inner.permanent(format!("unknown batch status `{other}`"))),
        };
        let mut fin = Finished { failure, ..Default::default() };
        for key in ["output_file_id", "error_file_id"] {
            if let Some(file) = batch.get(key).and_then(Value::as_str).filter(|s| !s.is_empty()) {
                let bytes = self.get_bytes(&self.url(&format!("files/{file}/content"))).await?;
                self.read_lines(&String::from_utf8_lossy(&bytes), &mut fin);
            }
        }
        Ok(Some(fin))
    }

    fn max_items(&self) -> usize {
        50_000
    }
}
