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
use crate::client::{parse_json, Client};

pub(crate) struct FilesBatch {
    client: Arc<Client>,
    voyage: bool,
}

impl FilesBatch {
    pub fn openai(client: Arc<Client>) -> Self {
        FilesBatch { client, voyage: false }
    }

    pub fn voyage(client: Arc<Client>) -> Self {
        FilesBatch { client, voyage: true }
    }

    fn line(&self, item: &BatchItem) -> Value {
        if self.voyage {
            json!({ "custom_id": item.hash, "body": { "input": [item.text] } })
        } else {
            json!({
                "custom_id": item.hash,
                "method": "POST",
                "url": "/v1/embeddings",
                "body": { "model": self.client.model(), "input": item.text },
            })
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
            let values = body.and_then(|b| b.get("data")).and_then(Value::as_array).and_then(|d| d.first()).and_then(|d| d.get("embedding"));
            match values.map(|v| self.client.floats(v)) {
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
            serde_json::to_writer(&mut jsonl, &self.line(item)).map_err(|e| self.client.permanent(e.to_string()))?;
            jsonl.push(b'\n');
        }
        let (content_type, body) = multipart(&[("purpose", "batch")], "file", "memory-embeddings.jsonl", "application/jsonl", &jsonl);
        let file = self.client.send(reqwest::Method::POST, &self.client.url("files"), Some((content_type, body))).await?;
        let file = self.client.parse(&file, "malformed file upload response")?;
        let file_id = file.get("id").and_then(Value::as_str).ok_or_else(|| self.client.permanent("file upload response has no `id`"))?;
        let mut create = json!({ "input_file_id": file_id, "endpoint": "/v1/embeddings" });
        if self.voyage {
            create["completion_window"] = json!("12h");
            create["request_params"] = json!({ "model": self.client.model(), "input_type": "document" });
        } else {
            create["completion_window"] = json!("24h");
        }
        let batch = self.client.post(&self.client.url("batches"), &create).await?;
        batch.get("id").and_then(Value::as_str).map(str::to_string).ok_or_else(|| self.client.permanent("batch creation response has no `id`"))
    }

    async fn poll(&self, job_id: &str) -> Result<Option<Finished>, EmbeddingError> {
        let url = self.client.url(&format!("batches/{job_id}"));
        let batch = self.client.parse(&self.client.get(&url).await?, &format!("malformed response from {url}"))?;
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
            other => return Err(self.client.permanent(format!("unknown batch status `{other}`"))),
        };
        let mut fin = Finished { failure, ..Default::default() };
        for key in ["output_file_id", "error_file_id"] {
            if let Some(file) = batch.get(key).and_then(Value::as_str).filter(|s| !s.is_empty()) {
                let bytes = self.client.get(&self.client.url(&format!("files/{file}/content"))).await?;
                self.read_lines(&String::from_utf8_lossy(&bytes), &mut fin);
            }
        }
        Ok(Some(fin))
    }

    fn max_items(&self) -> usize {
        50_000
    }
}
