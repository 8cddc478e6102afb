//! Gemini's asynchronous batch embedding, with inline requests:
//!
//! - `POST {base}/models/{m}:asyncBatchEmbedContent` `{batch: {displayName, model, inputConfig: {requests:
//!   {requests: [{request: {model, content: {parts: [{text}]}, taskType: "RETRIEVAL_DOCUMENT"}, metadata: {key}}]}}}}`
//!   -> a long-running operation `{name: "batches/{id}", metadata: {state, ...}}`.
//! - `GET {base}/batches/{id}` -> the operation (`metadata.state`, `done`, `error`, `response`) or the batch
//!   itself (`state`, `output`). States `BATCH_STATE_PENDING|RUNNING|SUCCEEDED|FAILED|CANCELLED|EXPIRED` (the SDKs
//!   also show `JOB_STATE_*`). The output's `inlinedResponses.inlinedResponses[]` hold `{metadata: {key},
//!   response: {embedding: {values}}}` or `{metadata, error: {code, message}}`, in request order.

use std::sync::Arc;

use async_trait::async_trait;
use memory_core::embedding::{BatchItem, EmbeddingError};
use serde_json::{json, Value};

use super::{BatchApi, Finished};
use crate::client::Client;
use crate::wire::gemini::{model_ref, request, text_parts, DOCUMENT_TASK};

pub(crate) struct GeminiBatch {
    client: Arc<Client>,
}

impl GeminiBatch {
    pub fn new(client: Arc<Client>) -> Self {
        GeminiBatch { client }
    }
}

fn state_of(v: &Value) -> &str {
    v.get("metadata").and_then(|m| m.get("state")).or_else(|| v.get("state")).and_then(Value::as_str).unwrap_or("")
}

/// The `inlinedResponses` list, wherever this form of the answer keeps it.
fn inlined(v: &Value) -> Option<&Vec<Value>> {
    let outputs = [v.get("response"), v.get("output"), v.get("metadata").and_then(|m| m.get("output"))];
    outputs.into_iter().flatten().find_map(|o| {
        let list = o.get("inlinedResponses")?;
        list.get("inlinedResponses").unwrap_or(list).as_array()
    })
}

#[async_trait]
impl BatchApi for GeminiBatch {
    async fn submit(&self, items: &[BatchItem]) -> Result<String, EmbeddingError> {
        let model = model_ref(self.client.model());
        let requests: Vec<Value> = items
            .iter()
            .map(|i| {
                let request = request(&model, text_parts(&i.text), Some(DOCUMENT_TASK), self.client.output_dims());
                json!({ "request": request, "metadata": { "key": i.hash } })
            })
            .collect();
        let body = json!({
            "batch": {
                "displayName": format!("memory-rs-{}", memory_core::now_ms()),
                "model": model,
                "inputConfig": { "requests": { "requests": requests } },
            }
        });
        let op = self.client.post(&self.client.url(&format!("{model}:asyncBatchEmbedContent")), &body).await?;
        op.get("name")
            .or_else(|| op.get("metadata").and_then(|m| m.get("name")))
            .and_then(Value::as_str)
            .map(str::to_string)
            .ok_or_else(|| self.client.permanent("asyncBatchEmbedContent response has no `name`"))
    }

    async fn poll(&self, job_id: &str) -> Result<Option<Finished>, EmbeddingError> {
        let v = self.client.parse(&self.client.get(&self.client.url(job_id)).await?, "malformed batch status")?;
        let state = state_of(&v);
        let kind = state.trim_start_matches("BATCH_STATE_").trim_start_matches("JOB_STATE_");
        let op_error = v.get("error").filter(|e| !e.is_null());
        let done = v.get("done").and_then(Value::as_bool).unwrap_or(false);
        let failure = match op_error {
            Some(e) => Some(format!("failed: {}", e.get("message").and_then(Value::as_str).map(str::to_string).unwrap_or_else(|| e.to_string()))),
            None => match kind {
                "SUCCEEDED" => None,
                "FAILED" => Some("failed".to_string()),
                "CANCELLED" => Some("cancelled".to_string()),
                "EXPIRED" => Some("expired before completing".to_string()),
                // A finished operation without a state of its own carries its output in `response`.
                _ if done => None,
                _ => return Ok(None),
            },
        };
        let mut fin = Finished { failure, ..Default::default() };
        match inlined(&v) {
            Some(list) => {
                for r in list {
                    let Some(key) = r.get("metadata").and_then(|m| m.get("key")).and_then(Value::as_str).map(str::to_string) else {
                        fin.rejected.push((String::new(), "an inline response has no metadata.key".into()));
                        continue;
                    };
                    if let Some(e) = r.get("error").filter(|e| !e.is_null()) {
                        let why = e.get("message").and_then(Value::as_str).map(str::to_string).unwrap_or_else(|| e.to_string());
                        fin.rejected.push((key, why));
                        continue;
                    }
                    let values = r.get("response").and_then(|x| x.get("embedding")).and_then(|e| e.get("values"));
                    match values.map(|x| self.client.floats(x)) {
                        Some(Ok(vector)) => fin.vectors.push((key, vector)),
                        Some(Err(e)) => fin.rejected.push((key, e.to_string())),
                        None => fin.rejected.push((key, "no embedding.values in the response".into())),
                    }
                }
            }
            None if fin.failure.is_none() => {
                fin.failure = Some("finished without inline responses (a responsesFile output is not read)".into());
            }
            None => {}
        }
        Ok(Some(fin))
    }

    fn max_items(&self) -> usize {
        1_000
    }
}
