//! The primary's failure state: since when and why it fails, the back-off before it is probed again, the single
//! probe once the back-off has passed, and (with [`FallbackPolicy::state_file`]) the same state kept between
//! processes, so a one-shot CLI run after a failed one does not pay the primary's timeout again.

use crate::locks::LockExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use tracing::{info, warn};

use super::FallbackPolicy;
use crate::error::{ErrorKind, MemoryError};
use crate::types::FallbackStatus;

/// How the wait before the next probe grows: exponential from `initial`, capped at `max`.
#[derive(Debug, Clone, Copy)]
struct Backoff {
    initial: Duration,
    max: Duration,
    multiplier: f64,
}

impl Backoff {
    fn of(policy: &FallbackPolicy) -> Backoff {
        Backoff { initial: policy.initial_backoff, max: policy.max_backoff, multiplier: policy.multiplier }
    }

    /// The wait after a failure, given the wait before it (`None`: the first failure).
    fn next(&self, current: Option<Duration>) -> Duration {
        let d = match current {
            None => self.initial,
            Some(d) => d.mul_f64(self.multiplier.max(1.0)),
        };
        d.min(self.max)
    }
}

/// The primary is failing: what it said last and when it may be probed.
#[derive(Debug, Clone)]
pub(super) struct Failure {
    pub reason: String,
    pub kind: ErrorKind,
    pub since_ms: i64,
    pub failures: u32,
    pub backoff: Duration,
    pub next_probe: Instant,
}

/// [`Failure`] as kept in the state file (instants as Unix milliseconds). The file's name is the host's, and its
/// fields are read back by later versions: keep them as they are.
#[derive(serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct SavedFailure {
    engine: String,
    reason: String,
    kind: ErrorKind,
    since_ms: i64,
    failures: u32,
    backoff_ms: u64,
    next_probe_ms: i64,
}

impl Failure {
    fn save(&self, engine: &str, path: &Path) {
        let wait = self.next_probe.saturating_duration_since(Instant::now());
        let saved = SavedFailure {
            engine: engine.to_string(),
            reason: self.reason.clone(),
            kind: self.kind,
            since_ms: self.since_ms,
            failures: self.failures,
            backoff_ms: self.backoff.as_millis() as u64,
            next_probe_ms: crate::now_ms() + wait.as_millis() as i64,
        };
        // Written aside and renamed: a reader never sees half a file.
        let write = || -> std::io::Result<()> {
            if let Some(dir) = path.parent() {
                std::fs::create_dir_all(dir)?;
            }
            let tmp = path.with_extension("tmp");
            std::fs::write(&tmp, serde_json::to_vec(&saved).unwrap_or_default())?;
            std::fs::rename(&tmp, path)
        };
        if let Err(e) = write() {
            warn!(path = %path.display(), error = %e, "cannot save the engine's failure state");
        }
    }

    /// The saved failure of `engine`, if its file is readable and names it.
    fn load(engine: &str, path: &Path, max_backoff: Duration) -> Option<Failure> {
        let saved: SavedFailure = serde_json::from_slice(&std::fs::read(path).ok()?).ok()?;
        if saved.engine != engine {
            return None;
        }
        let wait = Duration::from_millis(saved.next_probe_ms.saturating_sub(crate::now_ms()).max(0) as u64);
        Some(Failure {
            reason: saved.reason,
            kind: saved.kind,
            since_ms: saved.since_ms,
            failures: saved.failures,
            backoff: Duration::from_millis(saved.backoff_ms),
            // A clock moved backwards must not postpone the probe beyond one back-off, nor beyond this policy's.
            next_probe: Instant::now() + wait.min(Duration::from_millis(saved.backoff_ms)).min(max_backoff),
        })
    }
}

/// The health of one primary engine, as the fallback manager sees it.
pub(super) struct Health {
    /// The primary's name (logs, the state file's owner).
    engine: String,
    /// The fallback's name, for the log line that says who answers now.
    fallback: String,
    backoff: Backoff,
    state_file: Option<PathBuf>,
    failure: Mutex<Option<Failure>>,
    /// A call is probing the failing primary: the others go to the fallback meanwhile.
    probing: AtomicBool,
}

/// Ends a probe when dropped (whatever the probe's outcome, also when its future is dropped).
pub(super) struct ProbeGuard<'a>(Option<&'a AtomicBool>);

impl Drop for ProbeGuard<'_> {
    fn drop(&mut self) {
        if let Some(flag) = self.0 {
            flag.store(false, Ordering::SeqCst);
        }
    }
}

/// True when the state file says `engine` failed in an earlier run and is still inside its back-off window or
/// not yet probed since.
pub(super) fn failed_before(engine: &str, policy: &FallbackPolicy) -> bool {
    policy.state_file.as_deref().is_some_and(|f| Failure::load(engine, f, policy.max_backoff).is_some())
}

impl Health {
    /// Healthy, or failing as the state file says (a failure of an earlier run).
    pub fn new(engine: &str, fallback: &str, policy: &FallbackPolicy) -> Health {
        let failure = policy.state_file.as_deref().and_then(|p| Failure::load(engine, p, policy.max_backoff));
        if let Some(f) = &failure {
            info!(engine, reason = %f.reason, "memory engine failed in an earlier run; answering from the fallback until its back-off has passed");
        }
        Health {
            engine: engine.to_string(),
            fallback: fallback.to_string(),
            backoff: Backoff::of(policy),
            state_file: policy.state_file.clone(),
            failure: Mutex::new(failure),
            probing: AtomicBool::new(false),
        }
    }

    /// The current failure, `None` while the primary is healthy.
    pub fn failure(&self) -> Option<Failure> {
        self.failure.locked().clone()
    }

    pub fn is_failing(&self) -> bool {
        self.failure.locked().is_some()
    }

    /// `Some` while the fallback is answering.
    pub fn status(&self) -> Option<FallbackStatus> {
        self.failure.locked().as_ref().map(|f| FallbackStatus { from: self.engine.clone(), reason: f.reason.clone(), since: Some(f.since_ms) })
    }

    /// The last failure's reason ("unknown" when healthy), for messages.
    pub fn reason(&self) -> String {
        self.failure.locked().as_ref().map(|f| f.reason.clone()).unwrap_or_else(|| "unknown".into())
    }

    /// `Some` when this call may use the primary: it is healthy, or its back-off has passed and no other call is
    /// probing it (this call is then the probe until the guard drops).
    pub fn try_primary(&self) -> Option<ProbeGuard<'_>> {
        match &*self.failure.locked() {
            None => Some(ProbeGuard(None)),
            Some(f) if Instant::now() >= f.next_probe => {
                self.probing.compare_exchange(false, true, Ordering::SeqCst, Ordering::SeqCst).ok().map(|_| ProbeGuard(Some(&self.probing)))
            }
            Some(_) => None,
        }
    }

    /// The primary answered: healthy again, and the state file is removed.
    pub fn record_success(&self) {
        let mut g = self.failure.locked();
        if let Some(f) = g.take() {
            if let Some(path) = &self.state_file {
                let _ = std::fs::remove_file(path);
            }
            info!(
                engine = %self.engine,
                failures = f.failures,
                down_ms = crate::now_ms().saturating_sub(f.since_ms),
                "memory engine recovered; leaving the fallback"
            );
        }
    }

    /// The primary failed `op` with `e`: failing from now (the first failure) or again (the back-off grows).
    pub fn record_failure(&self, op: &str, e: &MemoryError) {
        let mut g = self.failure.locked();
        let reason = format!("{op}: {e}");
        let now = Instant::now();
        match g.as_mut() {
            Some(f) => {
                f.backoff = self.backoff.next(Some(f.backoff));
                f.next_probe = now + f.backoff;
                f.failures += 1;
                f.reason = reason;
                f.kind = e.kind();
                warn!(engine = %self.engine, error = %e, backoff_ms = f.backoff.as_millis() as u64, "memory engine still failing");
            }
            None => {
                let backoff = self.backoff.next(None);
                warn!(
                    engine = %self.engine,
                    fallback = %self.fallback,
                    error = %e,
                    backoff_ms = backoff.as_millis() as u64,
                    "memory engine failed; answering from the fallback"
                );
                *g = Some(Failure { reason, kind: e.kind(), since_ms: crate::now_ms(), failures: 1, backoff, next_probe: now + backoff });
            }
        }
        if let (Some(f), Some(path)) = (g.as_ref(), &self.state_file) {
            f.save(&self.engine, path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(ms: u64, max_ms: u64) -> FallbackPolicy {
        FallbackPolicy {
            initial_backoff: Duration::from_millis(ms),
            max_backoff: Duration::from_millis(max_ms),
            multiplier: 2.0,
            call_timeout: None,
            state_file: None,
            ..FallbackPolicy::default()
        }
    }

    fn down() -> MemoryError {
        MemoryError::Unavailable("qmd is broken".into())
    }

    #[test]
    fn the_backoff_starts_at_the_initial_wait_grows_and_is_capped() {
        let b = Backoff::of(&policy(20, 100));
        let mut seen = vec![b.next(None)];
        for _ in 0..4 {
            seen.push(b.next(seen.last().copied()));
        }
        assert_eq!(seen.iter().map(Duration::as_millis).collect::<Vec<_>>(), [20, 40, 80, 100, 100]);
        // A multiplier below 1 never shrinks the wait.
        let b = Backoff { multiplier: 0.5, ..b };
        assert_eq!(b.next(Some(Duration::from_millis(40))), Duration::from_millis(40));
    }

    #[test]
    fn a_failure_is_recorded_counted_and_cleared_by_a_success() {
        let h = Health::new("qmd", "builtin", &policy(60_000, 60_000));
        assert!(h.status().is_none() && h.try_primary().is_some());
        h.record_failure("search", &down());
        h.record_failure("sync", &MemoryError::Internal("bad output".into()));
        let f = h.failure().unwrap();
        assert_eq!((f.failures, f.kind, f.backoff), (2, ErrorKind::Internal, Duration::from_secs(60)));
        assert_eq!(h.reason(), format!("sync: {}", MemoryError::Internal("bad output".into())));
        let st = h.status().unwrap();
        assert_eq!(st.from, "qmd");
        assert!(st.reason.starts_with("sync: "), "{}", st.reason);
        // Inside the back-off nobody may call the primary.
        assert!(h.try_primary().is_none());
        h.record_success();
        assert!(h.failure().is_none() && !h.is_failing() && h.reason() == "unknown");
    }

    #[test]
    fn once_the_backoff_has_passed_exactly_one_call_probes() {
        let h = Health::new("qmd", "builtin", &policy(10, 10));
        h.record_failure("search", &down());
        std::thread::sleep(Duration::from_millis(20));
        let probe = h.try_primary().expect("the back-off has passed");
        assert!(h.try_primary().is_none(), "a second call must not probe while the first does");
        drop(probe);
        assert!(h.try_primary().is_some(), "the probe ended with its guard");
        // A healthy primary is no probe: any number of calls use it at once.
        h.record_success();
        let (a, b) = (h.try_primary(), h.try_primary());
        assert!(a.is_some() && b.is_some());
    }

    #[test]
    fn the_state_file_carries_the_failure_to_the_next_process_of_the_same_engine_only() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("agents/main/qmd-0123456789ab.fallback.json");
        let p = FallbackPolicy { state_file: Some(file.clone()), ..policy(60_000, 60_000) };
        let h = Health::new("qmd", "builtin", &p);
        h.record_failure("search", &down());
        let saved: serde_json::Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
        // The format earlier versions wrote (and read).
        for key in ["engine", "reason", "kind", "sinceMs", "failures", "backoffMs", "nextProbeMs"] {
            assert!(saved.get(key).is_some(), "{key} missing from {saved}");
        }
        assert!(failed_before("qmd", &p) && !failed_before("lancedb", &p));
        let next = Health::new("qmd", "builtin", &p);
        let f = next.failure().unwrap();
        assert_eq!((f.failures, f.reason), (1, format!("search: {}", down())));
        assert!(next.try_primary().is_none(), "still inside the saved back-off");
        assert!(Health::new("lancedb", "builtin", &p).failure().is_none());
        next.record_success();
        assert!(!file.exists(), "recovery removes the file");
        assert!(!failed_before("qmd", &p));
    }

    #[test]
    fn a_saved_probe_time_far_ahead_waits_at_most_one_backoff() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("qmd.fallback.json");
        let saved = serde_json::json!({
            "engine": "qmd", "reason": "search: down", "kind": "unavailable", "sinceMs": 1, "failures": 3,
            "backoffMs": 40, "nextProbeMs": crate::now_ms() + 86_400_000,
        });
        std::fs::write(&file, saved.to_string()).unwrap();
        let h = Health::new("qmd", "builtin", &FallbackPolicy { state_file: Some(file), ..policy(60_000, 60_000) });
        let wait = h.failure().unwrap().next_probe.saturating_duration_since(Instant::now());
        assert!(wait <= Duration::from_millis(40), "{wait:?}");
    }
}
