//! Append an entry to today's daily log and index it (`memory append`, the `memory_append` MCP tool, the Python
//! API's `append`): write the entry (memory-core does it append-only and atomically), then sync so the entry is
//! searchable at once.

use std::path::Path;

use memory_core::append::{append_entry, Appended};
use memory_core::{MemoryBackend, Result, SyncOptions};
use serde::Serialize;

/// An appended entry, where it is, and whether the index holds it yet.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AppendResult {
    /// Where the entry was written (file, lines, the entry as written).
    #[serde(flatten)]
    pub appended: Appended,
    /// `path#Lstart-Lend`, for citing the entry.
    pub citation: String,
    /// True when the entry is in the index (the sync after the write succeeded).
    pub indexed: bool,
    /// Why it is not indexed yet, when it is not (the entry is written all the same).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub warning: Option<String>,
}

/// Append `text` as a timestamped entry to today's log in `workspace` and index it, so the next search finds it.
pub async fn append_and_index(engine: &dyn MemoryBackend, workspace: &Path, text: &str) -> Result<AppendResult> {
    let text = text.to_string();
    let ws = workspace.to_path_buf();
    let appended = tokio::task::spawn_blocking(move || append_entry(&ws, &text))
        .await
        .map_err(|e| memory_core::MemoryError::Internal(format!("append task failed: {e}")))??;
    Ok(index_appended(engine, appended).await)
}

/// Index an entry already written (by [`append_and_index`], or by the `memory append` that hands the indexing to
/// a shared server: the entry is written once, whoever indexes it).
pub async fn index_appended(engine: &dyn MemoryBackend, appended: Appended) -> AppendResult {
    let citation = memory_core::citation::citation(&appended.path, appended.start_line, appended.end_line);
    // The note is safely on disk before the index is touched; a failed sync (another process holding the index
    // longer than the engine waits, say) only delays searchability: the watcher or the next search indexes it. A
    // retry would write the entry twice, so this is never an error.
    // The agent waits for this call: the embedding provider is waited for a few seconds at most (an entry not
    // embedded by then is found by its words and embedded by a later sync).
    let (indexed, warning) = match engine.sync(SyncOptions::agent_call()).await {
        Ok(report) if report.files_pending > 0 => {
            let why =
                report.warnings.iter().find(|w| w.starts_with("embedding failed")).map_or("the embedding provider did not answer", String::as_str);
            (true, Some(format!("the entry is found by its words; its vectors come with a later sync ({why})")))
        }
        Ok(_) => (true, None),
        Err(e) => {
            tracing::debug!(error = %e, "entry written but not indexed yet");
            (false, Some(format!("the entry is written; it is not indexed yet ({e}); the next search indexes it")))
        }
    };
    AppendResult { appended, citation, indexed, warning }
}
