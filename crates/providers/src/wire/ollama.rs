//! Ollama: `POST {base}/api/embed {model, input: [...]}` -> `{embeddings: [[...]]}`; servers older than that
//! endpoint answer 404, and then `POST {base}/api/embeddings {model, prompt}` -> `{embedding}`, one text per
//! request, is used from then on.

use std::sync::atomic::{AtomicBool, Ordering};

use async_trait::async_trait;
use memory_core::embedding::{EmbeddingError, EmbeddingPurpose};
use serde_json::{json, Value};
use tracing::info;

use super::{Wire, WireSettings};
use crate::client::Client;
use crate::http::{join_url, HttpStatusError};

pub(crate) struct Ollama {
    embed_url: String,
    legacy_url: String,
    /// The server turned out to have no `/api/embed`.
    legacy: AtomicBool,
}

impl Ollama {
    pub fn new(s: WireSettings<'_>) -> Self {
        Ollama { embed_url: join_url(s.base_url, "api/embed"), legacy_url: join_url(s.base_url, "api/embeddings"), legacy: AtomicBool::new(false) }
    }
}

#[async_trait]
impl Wire for Ollama {
    async fn embed(&self, client: &Client, texts: &[String], _purpose: EmbeddingPurpose) -> Result<Vec<Vec<f32>>, EmbeddingError> {
        let model = client.model();
        if !self.legacy.load(Ordering::Relaxed) {
            let body = json!({ "model": model, "input": texts });
            match client.post_raw(&self.embed_url, &body).await? {
                Ok(bytes) => {
                    let v = client.parse(&bytes, "malformed response")?;
                    let list =
                        v.get("embeddings").and_then(Value::as_array).ok_or_else(|| client.permanent("malformed response: no `embeddings` array"))?;
                    return list.iter().map(|e| client.floats(e)).collect();
                }
                Err(e) if e.status == 404 && !is_missing_model(&e) => {
                    info!(url = %self.embed_url, "ollama has no /api/embed; using the older /api/embeddings");
                    self.legacy.store(true, Ordering::Relaxed);
                }
                Err(e) if e.status == 404 => {
                    return Err(
                        client.permanent(format!("model `{model}` not found on the server ({}); pull it first (`ollama pull {model}`)", e.message()))
                    )
                }
                Err(e) => return Err(client.status_error(e)),
            }
        }
        let mut out = Vec::with_capacity(texts.len());
        for t in texts {
            let v = client.post(&self.legacy_url, &json!({ "model": model, "prompt": t })).await?;
            let values = v.get("embedding").ok_or_else(|| client.permanent("malformed response: no `embedding`"))?;
            out.push(client.floats(values)?);
        }
        Ok(out)
    }
}

fn is_missing_model(e: &HttpStatusError) -> bool {
    let m = e.message().to_lowercase();
    m.contains("model") && (m.contains("not found") || m.contains("pull"))
}
