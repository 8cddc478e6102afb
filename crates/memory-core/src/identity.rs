//! Index identity: everything that, when changed, makes the stored index wrong.

use serde::{Deserialize, Serialize};

/// Version of the keyword analysis in [`crate::analysis`]. Bump when tokenisation changes so indexes rebuild.
pub const ANALYZER_VERSION: &str = "an5";

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct IndexIdentity {
    /// Layout version of the store itself.
    pub schema: u32,
    pub provider: Option<String>,
    pub model: Option<String>,
    pub provider_fingerprint: Option<String>,
    pub dimensions: Option<usize>,
    pub sources: Vec<String>,
    pub extra_paths: Vec<String>,
    pub chunk_tokens: usize,
    pub chunk_overlap: usize,
    /// [`crate::chunking::CHUNKER_VERSION`]; empty in identities written before it was recorded.
    #[serde(default)]
    pub chunker: String,
    pub tokenizer: String,
}

impl IndexIdentity {
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("identity serialises")
    }

    pub fn from_json(s: &str) -> Option<IndexIdentity> {
        serde_json::from_str(s).ok()
    }

    /// Whether an index built with `self` serves `other`'s settings: no [`IndexIdentity::differences`].
    pub fn same_settings(&self, other: &IndexIdentity) -> bool {
        self.differences(other).is_empty()
    }

    /// Which fields differ, for the log line that explains a rebuild. The vector width counts only when both know
    /// it: a provider that learns its width from its first answer does not know it before (an index built by it
    /// stored none, and the process that reopens it knows none until it embeds), and the width follows from the
    /// model and its settings, which count.
    pub fn differences(&self, other: &IndexIdentity) -> Vec<&'static str> {
        let mut d = Vec::new();
        if self.schema != other.schema {
            d.push("schema");
        }
        if self.provider != other.provider {
            d.push("provider");
        }
        if self.model != other.model {
            d.push("model");
        }
        if self.provider_fingerprint != other.provider_fingerprint {
            d.push("provider settings");
        }
        if self.dimensions.is_some() && other.dimensions.is_some() && self.dimensions != other.dimensions {
            d.push("dimensions");
        }
        if self.sources != other.sources {
            d.push("sources");
        }
        if self.extra_paths != other.extra_paths {
            d.push("extraPaths");
        }
        if self.chunk_tokens != other.chunk_tokens || self.chunk_overlap != other.chunk_overlap || self.chunker != other.chunker {
            d.push("chunking");
        }
        if self.tokenizer != other.tokenizer {
            d.push("tokenizer");
        }
        d
    }
}
