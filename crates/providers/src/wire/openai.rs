//! OpenAI's embeddings API, also spoken by Mistral, Voyage and OpenAI-compatible servers:
//! `POST {base}/embeddings {model, input: [...], dimensions?, input_type?}` -> `{data: [{embedding, index}]}`.

use async_trait::async_trait;
use memory_core::embedding::{EmbeddingError, EmbeddingPurpose};
use serde_json::{json, Value};

use super::{InputTypes, Wire, WireSettings};
use crate::client::Client;

pub(crate) struct OpenAi {
    url: String,
    input_types: InputTypes,
    dimensions: Option<usize>,
}

impl OpenAi {
    pub fn new(s: WireSettings<'_>) -> Self {
        OpenAi { url: crate::http::join_url(s.base_url, "embeddings"), input_types: s.input_types, dimensions: s.output_dims }
    }
}

#[async_trait]
impl Wire for OpenAi {
    async fn embed(&self, client: &Client, texts: &[String], purpose: EmbeddingPurpose) -> Result<Vec<Vec<f32>>, EmbeddingError> {
        let mut body = json!({ "model": client.model(), "input": texts });
        if let Some(d) = self.dimensions {
            body["dimensions"] = json!(d);
        }
        if let Some(t) = self.input_types.for_purpose(purpose) {
            body["input_type"] = json!(t);
        }
        let v = client.post(&self.url, &body).await?;
        parse(client, &v, texts.len())
    }

    /// `;input_type=query/document` (`-` for a purpose without one), nothing when neither has one.
    fn fingerprint_part(&self) -> String {
        match &self.input_types {
            InputTypes { query: None, document: None } => String::new(),
            t => format!(";input_type={}/{}", t.query.as_deref().unwrap_or("-"), t.document.as_deref().unwrap_or("-")),
        }
    }
}

/// `{data: [{embedding, index}]}`, ordered by `index` when every item has one.
fn parse(client: &Client, v: &Value, n: usize) -> Result<Vec<Vec<f32>>, EmbeddingError> {
    let data = v.get("data").and_then(Value::as_array).ok_or_else(|| client.permanent("malformed response: no `data` array"))?;
    if data.len() != n {
        return Err(client.permanent(format!("returned {} vectors for {n} texts", data.len())));
    }
    let indices: Option<Vec<usize>> = data.iter().map(|d| d.get("index").and_then(Value::as_u64).map(|i| i as usize)).collect();
    let mut out: Vec<Option<Vec<f32>>> = vec![None; n];
    for (pos, d) in data.iter().enumerate() {
        let slot = match &indices {
            Some(ix) => ix[pos],
            None => pos,
        };
        let values = d.get("embedding").ok_or_else(|| client.permanent("malformed response: an item has no `embedding`"))?;
        let cell = out.get_mut(slot).ok_or_else(|| client.permanent(format!("response index {slot} out of range for {n} texts")))?;
        if cell.is_some() {
            return Err(client.permanent(format!("response index {slot} appears twice")));
        }
        *cell = Some(client.floats(values)?);
    }
    Ok(out.into_iter().map(std::option::Option::unwrap_or_default).collect())
}
