//! Provider batch jobs for large backfills (`memory.search.remote.batch`): OpenAI's Batch API, Voyage's batch
//! API (both: upload a JSONL file, create a batch, poll it, download the output and error files) and Gemini's
//! asynchronous batch embedding (`models/{m}:asyncBatchEmbedContent`, then `batches/{id}`).
//!
//! [`BatchRunner`] implements [`BatchEmbedder`]: it splits the documents into jobs, keeps at most `concurrency`
//! jobs in flight, and records every submitted job (its id and the chunk hashes it carries) in a state file
//! before waiting for it, so a run that is killed is resumed by the next one, which polls the recorded jobs
//! instead of resubmitting them. Each job's vectors are delivered as soon as its output is read (the sync writes
//! them to the embedding cache). Items a job rejects go back to the caller for synchronous embedding. A job that
//! fails, expires, is cancelled, times out, or cannot be submitted counts as a failure of the batch API; after two,
//! the batch API is disabled for the rest of the run and everything left is embedded synchronously.

mod gemini;
mod openai;
mod state;

use memory_core::locks::LockExt;
use std::collections::{HashMap, HashSet};
use std::fmt;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use memory_core::embedding::{BatchDelivery, BatchEmbedder, BatchItem, BatchOutcome, EmbeddingError};
use tokio::sync::mpsc::UnboundedSender;
use tracing::{info, warn};

use crate::catalogue::BatchProtocol;
use crate::client::Client;
use state::{JobRecord, StateFile};

/// Failures of the batch API after which it is disabled for the rest of the run.
pub const MAX_BATCH_FAILURES: usize = 2;

/// `memory.search.remote.batch` as the runner uses it.
#[derive(Debug, Clone)]
pub struct BatchSettings {
    /// Wait for submitted jobs to finish (`true`), or submit, collect what has finished, and leave the rest for
    /// a later sync (`false`).
    pub wait: bool,
    /// Jobs in flight at once.
    pub concurrency: usize,
    pub poll_interval: Duration,
    /// A job not finished this long after its submission counts as failed.
    pub timeout: Duration,
    /// Documents per job; `None` for the API's limit (OpenAI and Voyage 50,000 requests, Gemini 1,000 inline).
    pub max_items_per_job: Option<usize>,
}

impl Default for BatchSettings {
    fn default() -> Self {
        BatchSettings {
            wait: true,
            concurrency: 2,
            poll_interval: Duration::from_millis(2000),
            timeout: Duration::from_secs(60 * 60),
            max_items_per_job: None,
        }
    }
}

impl BatchSettings {
    /// From `memory.search.remote.batch`; `None` when it is off.
    pub fn from_config(c: &memory_core::config::BatchConfig) -> Option<BatchSettings> {
        c.enabled.then(|| BatchSettings {
            wait: c.wait,
            concurrency: c.concurrency.max(1),
            poll_interval: Duration::from_millis(c.poll_interval_ms.max(1)),
            timeout: Duration::from_secs(c.timeout_minutes.max(1) * 60),
            max_items_per_job: None,
        })
    }
}

/// What a finished job produced.
#[derive(Debug, Default)]
pub(crate) struct Finished {
    /// Raw vectors by custom id (chunk hash); checked and normalised by the runner.
    pub vectors: Vec<(String, Vec<f32>)>,
    /// Items the job rejected, with the API's reason.
    pub rejected: Vec<(String, String)>,
    /// Set when the job as a whole failed, expired or was cancelled (a failure of the batch API); `vectors` may
    /// still hold a partial output.
    pub failure: Option<String>,
}

/// One provider's batch wire format.
#[async_trait]
pub(crate) trait BatchApi: Send + Sync {
    /// Submit one job; returns its id.
    async fn submit(&self, items: &[BatchItem]) -> Result<String, EmbeddingError>;
    /// `None` while the job runs; its results once it reached a final state.
    async fn poll(&self, job_id: &str) -> Result<Option<Finished>, EmbeddingError>;
    /// Documents per job the API accepts.
    fn max_items(&self) -> usize;
}

/// Runs documents through a provider's batch API (see the module docs).
pub struct BatchRunner {
    client: Arc<Client>,
    api: Box<dyn BatchApi>,
    settings: BatchSettings,
    failures: Mutex<Vec<String>>,
}

impl fmt::Debug for BatchRunner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BatchRunner")
            .field("provider", &self.client.id())
            .field("settings", &self.settings)
            .field("disabled", &self.disabled_reason().is_some())
            .finish()
    }
}

impl BatchRunner {
    /// Batch jobs of `protocol` for the provider `client` calls.
    pub(crate) fn new(client: Arc<Client>, protocol: BatchProtocol, settings: BatchSettings) -> BatchRunner {
        let api: Box<dyn BatchApi> = match protocol {
            BatchProtocol::GeminiAsync => Box::new(gemini::GeminiBatch::new(client.clone())),
            BatchProtocol::VoyageFiles => Box::new(openai::FilesBatch::voyage(client.clone())),
            BatchProtocol::OpenAiFiles => Box::new(openai::FilesBatch::openai(client.clone())),
        };
        BatchRunner { client, api, settings, failures: Mutex::new(Vec::new()) }
    }

    fn per_job(&self) -> usize {
        self.settings.max_items_per_job.unwrap_or(usize::MAX).clamp(1, self.api.max_items())
    }

    fn is_disabled(&self) -> bool {
        self.failures.lock().map(|f| f.len() >= MAX_BATCH_FAILURES).unwrap_or(true)
    }

    /// Count one failure of the batch API; returns the warning for the sync report.
    fn fail(&self, outcome: &mut BatchOutcome, what: String) {
        let what = self.client.scrub(&what);
        outcome.jobs_failed += 1;
        let count = {
            let mut f = self.failures.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            f.push(what.clone());
            f.len()
        };
        warn!(provider = self.client.id(), failures = count, reason = %what, "batch embedding job failed");
        outcome.warnings.push(format!("{} batch job failed: {what}", self.client.id()));
        if count == MAX_BATCH_FAILURES {
            warn!(provider = self.client.id(), "batch API failed twice; disabled for this run, embedding synchronously");
            outcome
                .warnings
                .push(format!("{} batch API disabled for this run after {MAX_BATCH_FAILURES} failures; embedding synchronously", self.client.id()));
        }
    }

    /// Check, normalise and deliver a finished job's vectors; returns the hashes that got one.
    fn deliver(&self, fin: &mut Finished, deliver: &UnboundedSender<BatchDelivery>, outcome: &mut BatchOutcome) -> usize {
        let mut good = Vec::with_capacity(fin.vectors.len());
        for (hash, mut v) in fin.vectors.drain(..) {
            match self.client.check_one(&mut v) {
                Ok(()) => good.push((hash, v)),
                Err(e) => fin.rejected.push((hash, e.to_string())),
            }
        }
        if !fin.rejected.is_empty() {
            let (hash, why) = &fin.rejected[0];
            outcome.warnings.push(format!(
                "{} batch job rejected {} item(s) (embedded synchronously instead), e.g. {}: {}",
                self.client.id(),
                fin.rejected.len(),
                hash.chars().take(12).collect::<String>(),
                self.client.scrub(why)
            ));
        }
        let n = good.len();
        if n > 0 {
            // The receiver only goes away when the caller stopped listening; then nobody needs these vectors.
            let _ = deliver.send(good);
        }
        n
    }
}

fn now_ms() -> i64 {
    memory_core::now_ms()
}

#[async_trait]
impl BatchEmbedder for BatchRunner {
    async fn embed_documents(&self, items: &[BatchItem], state_file: &Path, deliver: UnboundedSender<BatchDelivery>) -> BatchOutcome {
        let mut outcome = BatchOutcome::default();
        if items.is_empty() {
            return outcome;
        }
        if let Some(reason) = self.disabled_reason() {
            outcome.warnings.push(reason);
            return outcome;
        }
        let fingerprint = self.client.fingerprint().to_string();
        let wanted: HashMap<&str, &BatchItem> = items.iter().map(|i| (i.hash.as_str(), i)).collect();
        let mut state = match StateFile::load(state_file) {
            Ok(s) => s,
            Err(e) => {
                warn!(path = %state_file.display(), error = %e, "batch job state unreadable; starting afresh");
                outcome.warnings.push(format!("batch job state {} unreadable ({e}); starting afresh", state_file.display()));
                StateFile::default()
            }
        };

        // Jobs of an earlier run that carry documents still wanted are polled, not resubmitted; jobs whose
        // documents are all gone or already embedded are forgotten.
        let mut active: Vec<JobRecord> = Vec::new();
        let mut covered: HashSet<String> = HashSet::new();
        state.jobs.retain(|job| {
            if job.fingerprint != fingerprint {
                return true;
            }
            if job.hashes.iter().any(|h| wanted.contains_key(h.as_str())) {
                covered.extend(job.hashes.iter().filter(|h| wanted.contains_key(h.as_str())).cloned());
                active.push(job.clone());
                true
            } else {
                false
            }
        });
        outcome.jobs_resumed = active.len();
        if !active.is_empty() {
            info!(provider = self.client.id(), jobs = active.len(), "resuming batch embedding jobs of an earlier run");
        }
        let todo: Vec<BatchItem> = items.iter().filter(|i| !covered.contains(&i.hash)).cloned().collect();
        let mut queue: std::collections::VecDeque<Vec<BatchItem>> =
            todo.chunks(self.per_job()).map(<[memory_core::embedding::BatchItem]>::to_vec).collect();
        if let Err(e) = state.save(state_file) {
            warn!(path = %state_file.display(), error = %e, "cannot write the batch job state");
        }

        loop {
            // Fill the in-flight set.
            while active.len() < self.settings.concurrency && !self.is_disabled() {
                let Some(job_items) = queue.pop_front() else { break };
                match self.api.submit(&job_items).await {
                    Ok(id) => {
                        info!(provider = self.client.id(), job = %id, items = job_items.len(), "batch embedding job submitted");
                        let record = JobRecord {
                            provider: self.client.id().to_string(),
                            fingerprint: fingerprint.clone(),
                            id,
                            hashes: job_items.iter().map(|i| i.hash.clone()).collect(),
                            submitted_ms: now_ms(),
                        };
                        state.jobs.push(record.clone());
                        if let Err(e) = state.save(state_file) {
                            warn!(path = %state_file.display(), error = %e, "cannot record a submitted batch job; an interrupted run would resubmit it");
                        }
                        outcome.jobs_submitted += 1;
                        active.push(record);
                    }
                    // These items are left to the caller (synchronous embedding).
                    Err(e) => self.fail(&mut outcome, format!("submitting a job of {} items: {e}", job_items.len())),
                }
            }
            if active.is_empty() {
                break;
            }

            // Poll every job in flight once.
            let mut still = Vec::with_capacity(active.len());
            for job in std::mem::take(&mut active) {
                if self.is_disabled() {
                    still.push(job);
                    continue;
                }
                let timed_out = now_ms().saturating_sub(job.submitted_ms) > self.settings.timeout.as_millis() as i64;
                match self.api.poll(&job.id).await {
                    Ok(None) if timed_out => {
                        self.fail(&mut outcome, format!("job {} did not finish within {} minutes", job.id, self.settings.timeout.as_secs() / 60));
                        state.remove(&job.id);
                    }
                    Ok(None) => still.push(job),
                    Ok(Some(mut fin)) => {
                        let n = self.deliver(&mut fin, &deliver, &mut outcome);
                        info!(provider = self.client.id(), job = %job.id, vectors = n, rejected = fin.rejected.len(), "batch embedding job finished");
                        if let Some(why) = fin.failure.take() {
                            self.fail(&mut outcome, format!("job {}: {why}", job.id));
                        }
                        state.remove(&job.id);
                    }
                    // Kept in the state file: a later run polls it again.
                    Err(e) => self.fail(&mut outcome, format!("polling job {}: {e}", job.id)),
                }
                if let Err(e) = state.save(state_file) {
                    warn!(path = %state_file.display(), error = %e, "cannot write the batch job state");
                }
            }
            active = still;

            if self.is_disabled() {
                // Jobs still in flight stay recorded; what they carry is embedded synchronously now.
                break;
            }
            if !self.settings.wait {
                for job in &active {
                    outcome.pending.extend(job.hashes.iter().filter(|h| wanted.contains_key(h.as_str())).cloned());
                }
                for part in &queue {
                    outcome.pending.extend(part.iter().map(|i| i.hash.clone()));
                }
                if !outcome.pending.is_empty() {
                    outcome.warnings.push(format!(
                        "{} chunks wait for {} batch job(s) (remote.batch.wait is off); a later sync collects them",
                        outcome.pending.len(),
                        active.len()
                    ));
                }
                break;
            }
            if active.is_empty() && queue.is_empty() {
                break;
            }
            if !active.is_empty() {
                tokio::time::sleep(self.settings.poll_interval).await;
            }
        }
        outcome
    }

    fn disabled_reason(&self) -> Option<String> {
        let f = self.failures.locked();
        (f.len() >= MAX_BATCH_FAILURES).then(|| {
            format!(
                "{} batch API disabled for this run after {} failures (last: {}); indexing embeds synchronously",
                self.client.id(),
                f.len(),
                f.last().map(String::as_str).unwrap_or("")
            )
        })
    }
}

/// A multipart/form-data body with text fields and one file, as the Files APIs take it.
pub(crate) fn multipart(fields: &[(&str, &str)], file_field: &str, file_name: &str, file_type: &str, data: &[u8]) -> (String, Vec<u8>) {
    let boundary = format!("memory-rs-{}", memory_core::sha256_hex(data).get(..24).unwrap_or("boundary"));
    let mut body = Vec::with_capacity(data.len() + 512);
    for (name, value) in fields {
        body.extend_from_slice(format!("--{boundary}\r\nContent-Disposition: form-data; name=\"{name}\"\r\n\r\n{value}\r\n").as_bytes());
    }
    body.extend_from_slice(
        format!(
            "--{boundary}\r\nContent-Disposition: form-data; name=\"{file_field}\"; filename=\"{file_name}\"\r\nContent-Type: {file_type}\r\n\r\n"
        )
        .as_bytes(),
    );
    body.extend_from_slice(data);
    body.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
    (format!("multipart/form-data; boundary={boundary}"), body)
}
