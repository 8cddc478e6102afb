//! A writer lease on S3 (and S3-compatible stores that honour conditional writes).
//!
//! The lease is one small JSON object `{owner, expiresMs}`:
//! - **acquire**: `PUT` with `If-None-Match: *` (only one host can create it). If it exists and its
//!   `expiresMs` has passed (a host died mid-sync), take it over with `PUT If-Match: <etag it was read with>`,
//!   so of several hosts seeing the same expired lease exactly one wins.
//! - **verify after write**: the holder reads the object back and checks the owner is itself, so a store that
//!   silently ignores the conditional headers is caught in the common case instead of giving two writers.
//! - **heartbeat**: while held, the lease is renewed every third of its period with `If-Match` on the last
//!   etag; a renewal refused by the store means the lease was lost (logged as an error).
//! - **release**: on drop, the object is deleted if it is still ours.
//!
//! Expiry compares `expiresMs` with the local clock, so hosts' clocks must agree to well within the lease
//! period (30 s by default; NTP does far better).

use memory_core::locks::LockExt;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use object_store::aws::{AmazonS3, AmazonS3Builder, AmazonS3ConfigKey};
use object_store::path::Path;
use object_store::{BackoffConfig, ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload, RetryConfig, UpdateVersion};
use serde::{Deserialize, Serialize};
use tracing::{debug, error, info, warn};

use memory_core::{MemoryError, Result};

/// How often a waiting writer checks the lease again.
const POLL: Duration = Duration::from_millis(250);

#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct LeaseBody {
    owner: String,
    expires_ms: i64,
}

/// The lease of one index; [`LeaseLock::acquire`] returns a guard that holds it.
pub(crate) struct LeaseLock {
    builder: AmazonS3Builder,
    store: Arc<AmazonS3>,
    path: Path,
    lease_name: String,
    ttl: Duration,
}

impl LeaseLock {
    pub fn new(bucket: &str, key: &str, storage_options: &BTreeMap<String, String>, ttl: Duration) -> Result<LeaseLock> {
        let mut builder = AmazonS3Builder::from_env().with_bucket_name(bucket);
        for (k, v) in storage_options {
            // Lance-only keys (client_max_retries...) are not the object store's; they are set below.
            if let Ok(key) = k.to_ascii_lowercase().parse::<AmazonS3ConfigKey>() {
                builder = builder.with_config(key, v);
            }
        }
        if !storage_options.keys().any(|k| k.ends_with("timeout")) {
            builder = builder
                .with_config(AmazonS3ConfigKey::Client(object_store::ClientConfigKey::ConnectTimeout), "5s")
                .with_config(AmazonS3ConfigKey::Client(object_store::ClientConfigKey::Timeout), "20s");
        }
        builder = builder.with_retry(RetryConfig { backoff: BackoffConfig::default(), max_retries: 2, retry_timeout: Duration::from_secs(20) });
        let store =
            Arc::new(builder.clone().build().map_err(|e| {
                MemoryError::config("memory.lancedb.storageOptions", format!("cannot set up the writer lease on s3://{bucket}: {e}"))
            })?);
        Ok(LeaseLock { builder, store, path: Path::from(key), lease_name: format!("s3://{bucket}/{key}"), ttl: ttl.max(Duration::from_secs(1)) })
    }

    fn body(&self, owner: &str) -> PutPayload {
        let b = LeaseBody { owner: owner.to_string(), expires_ms: memory_core::now_ms() + self.ttl.as_millis() as i64 };
        PutPayload::from(serde_json::to_vec(&b).expect("lease body serialises"))
    }

    fn err(&self, action: &str, e: object_store::Error) -> MemoryError {
        MemoryError::Unavailable(format!("writer lease {}: {action}: {e}", self.lease_name))
    }

    /// Take the lease, waiting for the holder to release it or for it to expire when `wait`.
    pub async fn acquire(&self, wait: bool) -> Result<LeaseGuard> {
        let owner = new_owner_id();
        loop {
            let created = self.store.put_opts(&self.path, self.body(&owner), PutOptions { mode: PutMode::Create, ..Default::default() }).await;
            let held = match created {
                Ok(r) => Some(r.e_tag),
                Err(object_store::Error::AlreadyExists { .. }) => self.try_take_over(&owner).await?,
                Err(e) => return Err(self.err("create", e)),
            };
            if let Some(etag) = held {
                if self.verify(&owner).await? {
                    debug!(lease = %self.lease_name, %owner, "writer lease acquired");
                    return Ok(self.guard(owner, etag));
                }
                warn!(lease = %self.lease_name, "the store accepted our lease but another writer's is there; waiting");
            }
            if !wait {
                let holder = self.read().await?.map(|(b, _)| b);
                let detail = match holder {
                    Some(b) => format!(" (held by {}, expires in {} s)", b.owner, ((b.expires_ms - memory_core::now_ms()).max(0) + 999) / 1000),
                    None => String::new(),
                };
                return Err(MemoryError::Unavailable(format!("another host is writing this LanceDB index{detail}")));
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// The current lease and its etag, if any.
    async fn read(&self) -> Result<Option<(LeaseBody, Option<String>)>> {
        match self.store.get(&self.path).await {
            Ok(g) => {
                let etag = g.meta.e_tag.clone();
                let bytes = g.bytes().await.map_err(|e| self.err("read", e))?;
                // An unreadable lease (a foreign object, a torn write on a store without atomic PUT) counts as
                // expired: it can be taken over, never block forever.
                let body = serde_json::from_slice(&bytes).unwrap_or(LeaseBody { owner: "(unreadable lease)".into(), expires_ms: 0 });
                Ok(Some((body, etag)))
            }
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(self.err("read", e)),
        }
    }

    /// An expired lease is replaced with ours, conditionally on the version we read. `None`: not taken.
    async fn try_take_over(&self, owner: &str) -> Result<Option<Option<String>>> {
        let Some((body, etag)) = self.read().await? else { return Ok(None) }; // released meanwhile: retry create
        if body.expires_ms > memory_core::now_ms() {
            return Ok(None);
        }
        let Some(etag) = etag else {
            return Err(MemoryError::Unavailable(format!(
                "writer lease {}: the store returns no ETag, so an expired lease cannot be taken over safely",
                self.lease_name
            )));
        };
        let mode = PutMode::Update(UpdateVersion { e_tag: Some(etag), version: None });
        match self.store.put_opts(&self.path, self.body(owner), PutOptions { mode, ..Default::default() }).await {
            Ok(r) => {
                info!(lease = %self.lease_name, previous = %body.owner, "took over an expired writer lease (its holder stopped renewing it)");
                Ok(Some(r.e_tag))
            }
            Err(object_store::Error::Precondition { .. } | object_store::Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(self.err("take over", e)),
        }
    }

    async fn verify(&self, owner: &str) -> Result<bool> {
        Ok(self.read().await?.is_some_and(|(b, _)| b.owner == owner))
    }

    fn guard(&self, owner: String, etag: Option<String>) -> LeaseGuard {
        let state = Arc::new(Mutex::new(Held { etag, lost: false }));
        let heartbeat = {
            let (store, path, lease_name, ttl, owner, state) =
                (self.store.clone(), self.path.clone(), self.lease_name.clone(), self.ttl, owner.clone(), state.clone());
            tokio::spawn(async move {
                loop {
                    tokio::time::sleep(ttl / 3).await;
                    let etag = state.locked().etag.clone();
                    let body = LeaseBody { owner: owner.clone(), expires_ms: memory_core::now_ms() + ttl.as_millis() as i64 };
                    let payload = PutPayload::from(serde_json::to_vec(&body).expect("lease body serialises"));
                    let mode = PutMode::Update(UpdateVersion { e_tag: etag, version: None });
                    match store.put_opts(&path, payload, PutOptions { mode, ..Default::default() }).await {
                        Ok(r) => state.locked().etag = r.e_tag,
                        Err(object_store::Error::Precondition { .. } | object_store::Error::NotFound { .. }) => {
                            error!(lease = %lease_name, "the writer lease was lost (expired and taken over by another host); this sync may overlap with theirs");
                            state.locked().lost = true;
                            return;
                        }
                        // A transient failure: the lease is still valid until it expires; retry at the next beat.
                        Err(e) => warn!(lease = %lease_name, error = %e, "could not renew the writer lease"),
                    }
                }
            })
        };
        LeaseGuard { heartbeat, state, builder: self.builder.clone(), path: self.path.clone(), lease_name: self.lease_name.clone(), owner }
    }
}

struct Held {
    etag: Option<String>,
    lost: bool,
}

/// Holds the lease (renewing it) until dropped; dropping deletes it if it is still ours.
pub(crate) struct LeaseGuard {
    heartbeat: tokio::task::JoinHandle<()>,
    state: Arc<Mutex<Held>>,
    builder: AmazonS3Builder,
    path: Path,
    lease_name: String,
    owner: String,
}

impl Drop for LeaseGuard {
    fn drop(&mut self) {
        self.heartbeat.abort();
        if self.state.locked().lost {
            return;
        }
        // Drop cannot await, and the caller's runtime may be a single thread that we would block: release on
        // a thread of our own with its own client, and wait for it so a process that exits right after a sync
        // does not leave its lease behind for a whole period.
        let (builder, path, lease_name, owner) = (self.builder.clone(), self.path.clone(), self.lease_name.clone(), self.owner.clone());
        let released = std::thread::spawn(move || {
            let rt = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
                Ok(rt) => rt,
                Err(e) => return warn!(lease = %lease_name, error = %e, "could not release the writer lease; it expires by itself"),
            };
            rt.block_on(async {
                let store = match builder.build() {
                    Ok(s) => s,
                    Err(e) => return warn!(lease = %lease_name, error = %e, "could not release the writer lease; it expires by itself"),
                };
                // Delete only our own lease (a renewal may have failed and another host taken over).
                let ours = match store.get(&path).await {
                    Ok(g) => g.bytes().await.ok().and_then(|b| serde_json::from_slice::<LeaseBody>(&b).ok()).is_some_and(|b| b.owner == owner),
                    Err(_) => false,
                };
                if ours {
                    match store.delete(&path).await {
                        Ok(()) => debug!(lease = %lease_name, "writer lease released"),
                        Err(e) => warn!(lease = %lease_name, error = %e, "could not release the writer lease; it expires by itself"),
                    }
                }
            });
        });
        let _ = released.join();
    }
}

/// Host, process and a per-process counter: distinct for every acquisition anywhere.
fn new_owner_id() -> String {
    static N: AtomicU64 = AtomicU64::new(0);
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|s| s.trim().to_string())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_else(|| "host".into());
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
    format!("{host}:{}:{}:{:x}", std::process::id(), N.fetch_add(1, Ordering::Relaxed), nanos & 0xffff_ffff)
}
