//! [`SecretString`]: API keys and other credentials in the configuration. Its `Debug` and `Display` never show
//! the value, so a config printed in a log line, a status dump or an error message does not leak a key.
//! Serialization is transparent (a config written back keeps its keys).

use std::fmt;

use serde::{Deserialize, Serialize};

/// A credential from the configuration (an API key, a header value): shown as `***` by `Debug` and `Display`,
/// read with [`expose`](Self::expose), serialised as the plain string.
#[derive(Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct SecretString(String);

impl SecretString {
    /// A secret holding `value`.
    pub fn new(value: impl Into<String>) -> Self {
        SecretString(value.into())
    }

    /// The raw value, for the one place that sends it (an HTTP header, an object-store client).
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// True when the value is empty or only whitespace.
    pub fn is_empty(&self) -> bool {
        self.0.trim().is_empty()
    }
}

impl fmt::Debug for SecretString {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(if self.0.is_empty() { "\"\"" } else { "\"***\"" })
    }
}

impl fmt::Display for SecretString {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("***")
    }
}

impl From<String> for SecretString {
    fn from(s: String) -> Self {
        SecretString(s)
    }
}

impl From<&str> for SecretString {
    fn from(s: &str) -> Self {
        SecretString(s.to_string())
    }
}
