//! One module per wire protocol ([`Protocol`]): how a request says what it embeds, how the answer is read, how
//! the key is sent. [`crate::remote::RemoteProvider`] plans the requests and checks the vectors; a protocol
//! turns one request's texts into raw vectors through the provider's [`Client`].

pub(crate) mod gemini;
mod ollama;
mod openai;

use async_trait::async_trait;
use memory_core::embedding::{EmbeddingError, EmbeddingPurpose, MediaInput};

use crate::catalogue::{InputTypeRule, Protocol};
use crate::client::Client;

/// One provider's wire protocol, built for its model and base URL.
#[async_trait]
pub(crate) trait Wire: Send + Sync {
    /// One request's worth of texts to raw vectors, in input order.
    async fn embed(&self, client: &Client, texts: &[String], purpose: EmbeddingPurpose) -> Result<Vec<Vec<f32>>, EmbeddingError>;

    /// How its requests tell queries from documents, for the fingerprint (`""`: they do not).
    fn fingerprint_part(&self) -> String {
        String::new()
    }

    /// Whether `model` embeds images and audio over this protocol.
    fn embeds_media(&self, _model: &str) -> bool {
        false
    }

    /// One raw vector per file, checked by the caller.
    async fn embed_media(&self, client: &Client, _media: &[MediaInput]) -> Result<Vec<Vec<f32>>, EmbeddingError> {
        Err(client.permanent("this provider does not embed images or audio"))
    }
}

/// What a protocol is built from.
pub(crate) struct WireSettings<'a> {
    pub base_url: &'a str,
    pub model: &'a str,
    pub input_types: InputTypes,
    /// The width to ask for, when the provider sends one.
    pub output_dims: Option<usize>,
}

pub(crate) fn build(protocol: Protocol, settings: WireSettings<'_>) -> Box<dyn Wire> {
    match protocol {
        Protocol::OpenAi => Box::new(openai::OpenAi::new(settings)),
        Protocol::Gemini => Box::new(gemini::Gemini::new(settings)),
        Protocol::Ollama => Box::new(ollama::Ollama::new(settings)),
    }
}

/// The header that carries an API key.
pub(crate) fn auth_header(protocol: Protocol, key: &str) -> (&'static str, String) {
    match protocol {
        Protocol::Gemini => gemini::auth_header(key),
        Protocol::OpenAi | Protocol::Ollama => ("authorization", format!("Bearer {key}")),
    }
}

/// What a request says it embeds, per purpose; `None`: nothing is sent for that purpose.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct InputTypes {
    pub query: Option<String>,
    pub document: Option<String>,
}

impl InputTypes {
    /// The types a provider sends: its rule applied to the configured ones (`on_request`: the settings ask for
    /// the rule's [`InputTypeRule::OnRequest`] types).
    pub fn resolve(rule: InputTypeRule, query: Option<&str>, document: Option<&str>, on_request: bool) -> Self {
        let clean = |s: Option<&str>| s.map(str::trim).filter(|s| !s.is_empty()).map(str::to_string);
        let configured = InputTypes { query: clean(query), document: clean(document) };
        let or = |t: InputTypes, q: &str, d: &str| InputTypes { query: t.query.or(Some(q.into())), document: t.document.or(Some(d.into())) };
        match rule {
            InputTypeRule::Never => InputTypes::default(),
            InputTypeRule::Configured => configured,
            InputTypeRule::Default { query, document } => or(configured, query, document),
            InputTypeRule::OnRequest { query, document } if on_request => or(configured, query, document),
            InputTypeRule::OnRequest { .. } => configured,
        }
    }

    pub fn for_purpose(&self, purpose: EmbeddingPurpose) -> Option<&str> {
        match purpose {
            EmbeddingPurpose::Query => self.query.as_deref(),
            EmbeddingPurpose::Document => self.document.as_deref(),
        }
    }
}
