//! `memory.lancedb`: the engine's settings, read from core's raw block ([`Config::engine_block`]); a bad value
//! or an unknown key is an error naming it as written (`memory.lancedb.nprobes`), checked for every engine's
//! block when the host loads its config (`BackendRegistry::check_config`).

use std::collections::BTreeMap;

use memory_core::config::{Config, SecretString};
use memory_core::{MemoryError, Result};
use serde::{Deserialize, Serialize};

use crate::BACKEND_NAME;

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct LanceDbConfig {
    /// Folder or object-store URI (`s3://bucket/prefix`). Default: `<state-dir>/lancedb/<agentId>`.
    pub uri: Option<String>,
    /// Passed to the object store (`aws_access_key_id`, `aws_endpoint`, `allow_http`...). Values may be
    /// credentials, so none is ever printed.
    pub storage_options: BTreeMap<String, SecretString>,
    /// Table name; default `memory_<agentId>`.
    pub table: Option<String>,
    /// IVF partitions each vector search probes once the table has its ANN index: more finds more of the
    /// true nearest neighbours, slower. Default: 3% of the partitions, at least 8.
    pub nprobes: Option<usize>,
}

impl LanceDbConfig {
    /// The `memory.lancedb` block of `config` (the defaults when there is none), checked.
    pub fn from_config(config: &Config) -> Result<LanceDbConfig> {
        let cfg = config.engine_block::<LanceDbConfig>(BACKEND_NAME)?.unwrap_or_default();
        if cfg.uri.as_deref().is_some_and(|u| u.trim().is_empty()) {
            return Err(MemoryError::config("memory.lancedb.uri", "must not be empty"));
        }
        if cfg.nprobes == Some(0) {
            return Err(MemoryError::config("memory.lancedb.nprobes", "must be at least 1"));
        }
        Ok(cfg)
    }

    /// Write this as the `memory.lancedb` block of `config` (for hosts and tests that build a config in code).
    pub fn write_to(&self, config: &mut Config) -> Result<()> {
        config.set_engine_block(BACKEND_NAME, self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(text: &str) -> Result<LanceDbConfig> {
        LanceDbConfig::from_config(&Config::from_json5(text)?)
    }

    fn key_of(text: &str) -> String {
        let e = read(text).unwrap_err();
        e.config_key().unwrap_or_else(|| panic!("not a config error: {e}")).to_string()
    }

    #[test]
    fn the_block_is_read_and_bad_values_name_their_key() {
        let c = read("{ memory: { lancedb: { uri: 's3://b/p', table: 't', nprobes: 12, storageOptions: { allow_http: 'true' } } } }").unwrap();
        assert_eq!((c.uri.as_deref(), c.table.as_deref(), c.nprobes), (Some("s3://b/p"), Some("t"), Some(12)));
        assert_eq!(c.storage_options["allow_http"].expose(), "true");
        assert_eq!(read("{}").unwrap(), LanceDbConfig::default());
        assert_eq!(key_of("{ memory: { lancedb: { nprobes: 0 } } }"), "memory.lancedb.nprobes");
        assert_eq!(key_of("{ memory: { lancedb: { uri: ' ' } } }"), "memory.lancedb.uri");
        // Wrong types and unknown keys name the key too.
        assert_eq!(key_of("{ memory: { lancedb: { nprobes: -3 } } }"), "memory.lancedb.nprobes");
        assert_eq!(key_of("{ memory: { lancedb: { storageOptions: { allow_http: true } } } }"), "memory.lancedb.storageOptions.allow_http");
        assert_eq!(key_of("{ memory: { lancedb: { urii: 'x' } } }"), "memory.lancedb.urii");
        let mut config = Config::default();
        let mut raw = serde_json::Map::new();
        raw.insert("nprobes".into(), "many".into());
        config.set_engine_block(BACKEND_NAME, &raw).unwrap();
        let e = LanceDbConfig::from_config(&config).unwrap_err();
        assert!(matches!(&e, MemoryError::Config { key, .. } if key == "memory.lancedb.nprobes"), "{e}");
    }

    #[test]
    fn a_block_written_in_code_reads_back_the_same() {
        let c = LanceDbConfig { uri: Some("idx".into()), table: Some("t".into()), nprobes: Some(4), ..Default::default() };
        let mut config = Config::default();
        c.write_to(&mut config).unwrap();
        assert_eq!(LanceDbConfig::from_config(&config).unwrap(), c);
    }
}
