//! Gemini: `POST {base}/models/{m}:embedContent {model, content: {parts}, taskType, outputDimensionality?}` ->
//! `{embedding: {values}}` for one text (and for one image or audio file, as `inline_data`), and
//! `:batchEmbedContents {requests: [...]}` -> `{embeddings: [{values}]}` for several. The key goes in
//! `x-goog-api-key`.

use async_trait::async_trait;
use memory_core::embedding::{EmbeddingError, EmbeddingPurpose, MediaInput};
use serde_json::{json, Value};

use super::{InputTypes, Wire, WireSettings};
use crate::client::Client;
use crate::http::join_url;

/// The task of media and batch requests: always documents (the configured document type is not applied).
pub(crate) const DOCUMENT_TASK: &str = "RETRIEVAL_DOCUMENT";

pub(crate) struct Gemini {
    single_url: String,
    batch_url: String,
    model_ref: String,
    output_dims: Option<usize>,
    tasks: InputTypes,
}

impl Gemini {
    pub fn new(s: WireSettings<'_>) -> Self {
        let model_ref = model_ref(s.model);
        Gemini {
            single_url: join_url(s.base_url, &format!("{model_ref}:embedContent")),
            batch_url: join_url(s.base_url, &format!("{model_ref}:batchEmbedContents")),
            model_ref,
            output_dims: s.output_dims,
            tasks: s.input_types,
        }
    }
}

pub(crate) fn auth_header(key: &str) -> (&'static str, String) {
    ("x-goog-api-key", key.to_string())
}

/// `models/{m}`, whether or not the configured name carries the prefix.
pub(crate) fn model_ref(model: &str) -> String {
    format!("models/{}", model.strip_prefix("models/").unwrap_or(model))
}

/// One `EmbedContentRequest`: `parts` (text or inline data) of `model_ref`.
pub(crate) fn request(model_ref: &str, parts: Value, task: Option<&str>, output_dims: Option<usize>) -> Value {
    let mut r = json!({ "model": model_ref, "content": { "parts": parts } });
    if let Some(t) = task {
        r["taskType"] = json!(t);
    }
    if let Some(d) = output_dims {
        r["outputDimensionality"] = json!(d);
    }
    r
}

pub(crate) fn text_parts(text: &str) -> Value {
    json!([{ "text": text }])
}

/// Models that embed images and audio beside text.
pub fn is_multimodal_model(model: &str) -> bool {
    let m = model.strip_prefix("models/").unwrap_or(model);
    memory_core::config::MULTIMODAL_MODELS.contains(&m)
}

/// Standard base64 with padding (RFC 4648), for inline media.
fn base64(data: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(data)
}

fn values(client: &Client, embedding: Option<&Value>, missing: &str) -> Result<Vec<f32>, EmbeddingError> {
    let values = embedding.and_then(|e| e.get("values")).ok_or_else(|| client.permanent(missing.to_string()))?;
    client.floats(values)
}

#[async_trait]
impl Wire for Gemini {
    async fn embed(&self, client: &Client, texts: &[String], purpose: EmbeddingPurpose) -> Result<Vec<Vec<f32>>, EmbeddingError> {
        let task = self.tasks.for_purpose(purpose);
        let request = |t: &String| request(&self.model_ref, text_parts(t), task, self.output_dims);
        if texts.len() == 1 {
            let v = client.post(&self.single_url, &request(&texts[0])).await?;
            Ok(vec![values(client, v.get("embedding"), "malformed response: no `embedding.values`")?])
        } else {
            let body = json!({ "requests": texts.iter().map(request).collect::<Vec<_>>() });
            let v = client.post(&self.batch_url, &body).await?;
            let list = v.get("embeddings").and_then(Value::as_array).ok_or_else(|| client.permanent("malformed response: no `embeddings` array"))?;
            list.iter().map(|e| values(client, Some(e), "malformed response: an embedding has no `values`")).collect()
        }
    }

    /// `;taskType={query}/{document}`.
    fn fingerprint_part(&self) -> String {
        format!(";taskType={}/{}", self.tasks.query.as_deref().unwrap_or(""), self.tasks.document.as_deref().unwrap_or(""))
    }

    fn embeds_media(&self, model: &str) -> bool {
        is_multimodal_model(model)
    }

    /// `content.parts[{inline_data: {mime_type, data}}]` (base64), one request per file (files are large).
    async fn embed_media(&self, client: &Client, media: &[MediaInput]) -> Result<Vec<Vec<f32>>, EmbeddingError> {
        if !self.embeds_media(client.model()) {
            return Err(EmbeddingError::NotConfigured {
                provider: client.id().to_string(),
                message: format!("model `{}` does not embed images or audio (use gemini-embedding-2-preview)", client.model()),
            });
        }
        let mut out = Vec::with_capacity(media.len());
        for m in media {
            let parts = json!([{ "inline_data": { "mime_type": m.mime_type, "data": base64(&m.data) } }]);
            let v = client.post(&self.single_url, &request(&self.model_ref, parts, Some(DOCUMENT_TASK), self.output_dims)).await?;
            out.push(values(client, v.get("embedding"), "malformed response: no `embedding.values`")?);
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_matches_rfc4648_vectors() {
        for (input, want) in [("", ""), ("f", "Zg=="), ("fo", "Zm8="), ("foo", "Zm9v"), ("foobar", "Zm9vYmFy")] {
            assert_eq!(base64(input.as_bytes()), want);
        }
        assert_eq!(base64(&[0xff, 0xfe, 0x00]), "//4A");
    }
}
