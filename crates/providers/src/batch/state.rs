//! The batch job state file: which jobs were submitted and which chunk hashes each carries, so an interrupted
//! backfill polls its jobs again instead of resubmitting them. Written whole to a temporary file and renamed,
//! so a kill mid-write leaves the previous version.

use std::path::Path;

use serde::{Deserialize, Serialize};

const VERSION: u32 = 1;

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct JobRecord {
    pub provider: String,
    /// Provider fingerprint: jobs of other settings (another model) are never mixed in.
    pub fingerprint: String,
    pub id: String,
    pub hashes: Vec<String>,
    pub submitted_ms: i64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct StateFile {
    pub version: u32,
    pub jobs: Vec<JobRecord>,
}

impl Default for StateFile {
    fn default() -> Self {
        StateFile { version: VERSION, jobs: Vec::new() }
    }
}

impl StateFile {
    /// The recorded jobs; an absent file is an empty state.
    pub fn load(path: &Path) -> Result<StateFile, String> {
        match std::fs::read(path) {
            Ok(bytes) => {
                let s: StateFile = serde_json::from_slice(&bytes).map_err(|e| e.to_string())?;
                if s.version != VERSION {
                    return Err(format!("unknown version {}", s.version));
                }
                Ok(s)
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(StateFile::default()),
            Err(e) => Err(e.to_string()),
        }
    }

    /// Write the state (or remove the file when no job is left).
    pub fn save(&self, path: &Path) -> std::io::Result<()> {
        if self.jobs.is_empty() {
            return match std::fs::remove_file(path) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
                _ => Ok(()),
            };
        }
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let tmp = path.with_extension("json.tmp");
        std::fs::write(&tmp, serde_json::to_vec_pretty(self).map_err(std::io::Error::other)?)?;
        std::fs::rename(&tmp, path)
    }

    pub fn remove(&mut self, id: &str) {
        self.jobs.retain(|j| j.id != id);
    }
}
