//! How long a sync or a search waits for the embedding provider, and when it does not wait.
//!
//! A remote provider that is down costs its retries (0.5 + 1 + 2 s) on every call, and one that does not answer
//! (a network that drops packets) its request timeout on every attempt: minutes, while the sync holds the index.
//! An agent's tool call has seconds (OpenClaw's memory plugin gives `memory serve` 8 s, then restarts it after
//! three misses), and the words alone answer it. So:
//! - a search or an append bounds its embedding work by one deadline ([`EMBED_WAIT`]; a search's sync and its
//!   query vector share it): what is not embedded by then is indexed by its words and waits for a later sync, and
//!   the search answers by its words saying why;
//! - a background sync beside searches (`memory serve`'s watcher) gives each provider call [`CALL_WAIT`], so a
//!   provider that stopped answering holds the index for one such wait;
//! - after a slow failure or a call given up, neither waits for the provider at all for [`EMBED_PAUSE`] (one call
//!   pays, not every call); any answer from the provider ends the pause. The watcher's retry of the files left
//!   waiting comes after the pause and probes the provider again.
//!
//! `memory index` ([`EmbedWait::AsLongAsItTakes`]) is neither bounded nor paused: someone watches its progress.
//!
//! One request to a remote provider ([`RequestLimits`]): a document request may take
//! `memory.search.sync.embeddingBatchTimeoutSeconds` (OpenClaw's key), by default [`REMOTE_REQUEST_TIMEOUT`] for an
//! API and [`LOCAL_SERVER_REQUEST_TIMEOUT`] for a server on this machine or the local network (a model on a CPU
//! needs tens of seconds for a request of 16 long texts); `memory.search.remote.nonBatchConcurrency` requests are
//! in flight at once, by default [`REMOTE_CONCURRENCY`] for an API and [`LOCAL_SERVER_CONCURRENCY`] for a local
//! server (requests at once on one CPU only share it: each takes that many times longer and times out). A
//! background sync gives a call at least its requests' timeouts (`Bound::for_call`), so a slow local server is not cut
//! off by [`CALL_WAIT`].

use std::future::Future;
use std::sync::Mutex;
use std::time::Duration;

// Tokio's clock, so that the tests can run it forward.
use tokio::time::Instant;

use crate::embedding::EmbeddingError;
use crate::types::EmbedWait;

// The waits a caller names in `SyncOptions`, defined beside it (the contract's types name no engine part).
pub use crate::types::{CALL_WAIT, EMBED_WAIT};

/// How a sync or a search waits for a lock another task or process holds: it polls, the pauses doubling from 2 ms
/// to 25 ms (a short sync ends within a few polls, a long wait costs little CPU), until a deadline.
pub(crate) struct LockPoll {
    deadline: std::time::Instant,
    pause: Duration,
}

impl LockPoll {
    /// Polls until `wait` from now.
    pub(crate) fn within(wait: Duration) -> LockPoll {
        LockPoll { deadline: std::time::Instant::now() + wait, pause: Duration::from_millis(2) }
    }

    /// Whether the deadline has passed: the caller gives up.
    pub(crate) fn expired(&self) -> bool {
        std::time::Instant::now() >= self.deadline
    }

    /// Pause before the next poll.
    pub(crate) async fn pause(&mut self) {
        tokio::time::sleep(self.pause).await;
        self.pause = (self.pause * 2).min(Duration::from_millis(25));
    }
}

/// The longest one embedding request to a remote API may take, unless `embeddingBatchTimeoutSeconds` says.
pub const REMOTE_REQUEST_TIMEOUT: Duration = Duration::from_secs(120);

/// The longest one embedding request to a server on this machine or the local network may take, unless
/// `embeddingBatchTimeoutSeconds` says.
pub const LOCAL_SERVER_REQUEST_TIMEOUT: Duration = Duration::from_secs(600);

/// Requests in flight at once to a remote API, unless `remote.nonBatchConcurrency` says.
pub const REMOTE_CONCURRENCY: usize = 4;

/// Requests in flight at once to a server on this machine or the local network, unless
/// `remote.nonBatchConcurrency` says.
pub const LOCAL_SERVER_CONCURRENCY: usize = 1;

/// How one remote provider's requests are limited: each request's timeout and how many are in flight at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RequestLimits {
    pub request_timeout: Duration,
    pub concurrency: usize,
}

impl RequestLimits {
    /// The limits for a provider at `base_url` (a server on this machine or the local network, or not), from the
    /// configured keys where they are set. `serial` providers (Ollama, which OpenClaw also calls one request at a
    /// time) default to one request in flight wherever they are.
    pub fn for_server(search: &crate::config::SearchConfig, base_url: &str, serial: bool) -> RequestLimits {
        let local = is_local_server(base_url);
        let request_timeout = search.sync.embedding_batch_timeout_seconds.map(Duration::from_secs).unwrap_or(if local {
            LOCAL_SERVER_REQUEST_TIMEOUT
        } else {
            REMOTE_REQUEST_TIMEOUT
        });
        let default_concurrency = if local || serial { LOCAL_SERVER_CONCURRENCY } else { REMOTE_CONCURRENCY };
        RequestLimits { request_timeout, concurrency: search.remote.non_batch_concurrency.unwrap_or(default_concurrency).max(1) }
    }
}

/// Whether `base_url` names a server on this machine or the local network: loopback, a private or link-local
/// address, `localhost`, a `.local` name or a bare host name (no dot), as OpenClaw tells local servers apart.
pub fn is_local_server(base_url: &str) -> bool {
    let rest = base_url.split_once("://").map_or(base_url, |(_, r)| r);
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    let host_port = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let host = if let Some(v6) = host_port.strip_prefix('[') {
        v6.split(']').next().unwrap_or("")
    } else {
        host_port.rsplit_once(':').map_or(host_port, |(h, _)| h)
    };
    let host = host.trim_end_matches('.').to_ascii_lowercase();
    if host.is_empty() {
        return false;
    }
    if let Ok(ip) = host.parse::<std::net::IpAddr>() {
        return match ip {
            std::net::IpAddr::V4(v4) => v4.is_loopback() || v4.is_private() || v4.is_link_local() || v4.is_unspecified(),
            std::net::IpAddr::V6(v6) => {
                v6.is_loopback() || v6.is_unspecified() || (v6.segments()[0] & 0xfe00) == 0xfc00 || (v6.segments()[0] & 0xffc0) == 0xfe80
            }
        };
    }
    host == "localhost" || host.ends_with(".localhost") || host.ends_with(".local") || !host.contains('.')
}

/// After the provider failed slowly or did not answer in time, bounded syncs and searches skip it this long.
pub const EMBED_PAUSE: Duration = Duration::from_secs(30);

/// A failure that took at least this long was slow (a provider down behind retries). A quicker one (a refused
/// key, a model folder that is away) costs nothing to try again and starts no pause.
const SLOW_FAILURE: Duration = Duration::from_secs(1);

/// The warning of a sync that left its chunks for a later one because the provider is paused (`why`).
pub(crate) fn left_for_later(why: &str) -> String {
    format!("embedding failed: {why}; indexed by words, embedded by a later sync")
}

/// An [`EmbedWait`] from the moment its sync (or search) started.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Bound {
    None,
    Until(Instant),
    EachCall(Duration),
    /// Not at all: the chunks are indexed by their words and wait for their vectors (a first build's first pass).
    WordsOnly,
}

impl Bound {
    pub(crate) fn of(wait: EmbedWait) -> Bound {
        match wait {
            EmbedWait::AsLongAsItTakes => Bound::None,
            EmbedWait::AtMost(d) => Bound::Until(Instant::now() + d),
            EmbedWait::EachCallAtMost(d) => Bound::EachCall(d),
        }
    }

    /// The bound of one call whose own limit is `call_timeout` ([`EmbeddingProvider::call_timeout`]): a
    /// background sync's call gets at least that (a slow local server's requests, one after another), so a call
    /// the provider would still answer is not given up. An agent's wait stays its own.
    ///
    /// [`EmbeddingProvider::call_timeout`]: crate::embedding::EmbeddingProvider::call_timeout
    pub(crate) fn for_call(self, call_timeout: Option<Duration>) -> Bound {
        match self {
            Bound::EachCall(d) => Bound::EachCall(d.max(call_timeout.unwrap_or_default())),
            other => other,
        }
    }

    /// Whether the provider's pause applies: to every bounded wait.
    pub(crate) fn bounded(&self) -> bool {
        !matches!(self, Bound::None)
    }

    /// Whether the provider is not called at all.
    pub(crate) fn words_only(&self) -> bool {
        matches!(self, Bound::WordsOnly)
    }

    fn deadline(&self) -> Option<Instant> {
        match *self {
            Bound::None => None,
            Bound::Until(t) => Some(t),
            Bound::EachCall(d) => Some(Instant::now() + d),
            Bound::WordsOnly => Some(Instant::now()),
        }
    }
}

/// The last slow failure of the provider: when, and what it said.
#[derive(Default)]
pub(crate) struct Patience {
    slow_failure: Mutex<Option<(Instant, String)>>,
}

impl Patience {
    /// Why a bounded wait should not call the provider now; `None` when it may.
    pub(crate) fn paused(&self) -> Option<String> {
        let last = self.slow_failure.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let (at, why) = last.as_ref()?;
        let ago = at.elapsed();
        (ago < EMBED_PAUSE)
            .then(|| format!("{why} ({} s ago; not waited for again for {} s)", ago.as_secs(), EMBED_PAUSE.saturating_sub(ago).as_secs().max(1)))
    }

    /// Run one call to the provider within `bound`. A slow failure or a call given up starts the pause; an answer
    /// ends it.
    pub(crate) async fn call<T>(&self, bound: Bound, call: impl Future<Output = Result<T, EmbeddingError>>) -> Result<T, String> {
        let started = Instant::now();
        let deadline = bound.deadline();
        let outcome = match deadline {
            Some(d) => match tokio::time::timeout_at(d, call).await {
                Ok(result) => result.map_err(|e| e.to_string()),
                Err(_) => Err(match bound {
                    Bound::EachCall(d) => format!("the embedding provider did not answer within {} s", d.as_secs()),
                    _ => format!("the embedding provider did not answer in time (a search or an append waits {} s for it)", EMBED_WAIT.as_secs()),
                }),
            },
            None => call.await.map_err(|e| e.to_string()),
        };
        let mut last = self.slow_failure.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        match &outcome {
            Ok(_) => *last = None,
            Err(why) if started.elapsed() >= SLOW_FAILURE || deadline.is_some_and(|d| Instant::now() >= d) => {
                *last = Some((Instant::now(), why.clone()));
            }
            Err(_) => {}
        }
        outcome
    }

    /// Run, within `bound`, a call whose answer can wait for a later sync or search (the unrelated-text probes).
    /// Neither running out of time nor failing pauses the provider: the calls that cannot wait (a query, a
    /// note's chunks) say whether it answers, and a calibration squeezed out of a busy search's wait says nothing
    /// about the provider.
    pub(crate) async fn call_that_can_wait<T>(&self, bound: Bound, call: impl Future<Output = Result<T, EmbeddingError>>) -> Result<T, Missed> {
        match bound.deadline() {
            Some(d) => match tokio::time::timeout_at(d, call).await {
                Ok(result) => result.map_err(|e| Missed::Failed(e.to_string())),
                Err(_) => Err(Missed::TimedOut),
            },
            None => call.await.map_err(|e| Missed::Failed(e.to_string())),
        }
    }
}

/// Why a call that can wait gave no answer.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Missed {
    /// The wait ran out first.
    TimedOut,
    /// The provider failed, saying this.
    Failed(String),
}

#[cfg(test)]
mod tests {
    use super::*;

    fn down() -> EmbeddingError {
        EmbeddingError::Transient { provider: "p".into(), message: "HTTP 503".into() }
    }

    #[tokio::test(start_paused = true)]
    async fn a_slow_failure_pauses_and_an_answer_ends_the_pause() {
        let p = Patience::default();
        // A quick failure (a refused key) starts no pause.
        assert!(p.call::<()>(Bound::None, async { Err(down()) }).await.is_err());
        assert_eq!(p.paused(), None);
        // A slow one does.
        let slow = async {
            tokio::time::sleep(Duration::from_secs(3)).await;
            Err::<(), _>(down())
        };
        assert!(p.call(Bound::None, slow).await.is_err());
        let why = p.paused().expect("paused");
        assert!(why.contains("HTTP 503") && why.contains("not waited for again"), "{why}");
        // An answer (a background sync's, say) ends it.
        assert_eq!(p.call(Bound::None, async { Ok::<_, EmbeddingError>(1) }).await, Ok(1));
        assert_eq!(p.paused(), None);
    }

    #[tokio::test(start_paused = true)]
    async fn a_call_is_given_up_at_its_deadline_and_pauses() {
        let p = Patience::default();
        let never = std::future::pending::<Result<(), EmbeddingError>>();
        let started = Instant::now();
        let err = p.call(Bound::of(EmbedWait::AtMost(EMBED_WAIT)), never).await.unwrap_err();
        assert!(err.contains("did not answer in time (a search or an append waits 5 s"), "{err}");
        assert!(started.elapsed() <= EMBED_WAIT + Duration::from_millis(50));
        assert!(p.paused().is_some());
    }

    /// The probes squeezed into the end of a search's wait used to start the pause: the next searches of a
    /// server then answered by words for 30 s although the provider answered every query.
    #[tokio::test]
    async fn a_call_that_can_wait_does_not_pause_the_provider() {
        let p = Patience::default();
        let never = std::future::pending::<Result<(), EmbeddingError>>();
        let missed = p.call_that_can_wait(Bound::Until(Instant::now() + Duration::from_millis(20)), never).await.unwrap_err();
        assert_eq!(missed, Missed::TimedOut);
        let failing = async { Err::<(), _>(EmbeddingError::Permanent { provider: "p".into(), message: "down".into() }) };
        assert!(matches!(p.call_that_can_wait(Bound::None, failing).await, Err(Missed::Failed(m)) if m.contains("down")));
        assert!(p.paused().is_none());
    }

    #[test]
    fn a_background_call_waits_at_least_the_provider_s_request_timeout() {
        let background = Bound::of(EmbedWait::EachCallAtMost(CALL_WAIT));
        let Bound::EachCall(d) = background.for_call(Some(Duration::from_secs(600))) else { panic!() };
        assert_eq!(d, Duration::from_secs(600));
        let Bound::EachCall(d) = background.for_call(Some(Duration::from_secs(5))) else { panic!() };
        assert_eq!(d, CALL_WAIT);
        let agent = Bound::of(EmbedWait::AtMost(EMBED_WAIT)).for_call(Some(Duration::from_secs(600)));
        assert!(matches!(agent, Bound::Until(_)), "an agent's wait stays its own");
    }

    #[test]
    fn local_servers_are_told_apart_from_remote_apis() {
        for local in [
            "http://127.0.0.1:8080/v1",
            "http://localhost:11434",
            "http://[::1]:8000/v1",
            "http://192.168.1.20:8000",
            "http://10.0.0.5/v1",
            "http://172.20.0.2:80",
            "http://gpu-box:8080/v1",
            "http://studio.local:1234/v1",
            "http://user:pw@127.0.0.1:9/v1",
        ] {
            assert!(is_local_server(local), "{local}");
        }
        for remote in ["https://api.openai.com/v1", "https://generativelanguage.googleapis.com", "https://8.8.8.8/v1", "https://[2001:db8::1]/v1", ""]
        {
            assert!(!is_local_server(remote), "{remote}");
        }
    }

    #[test]
    fn request_limits_come_from_the_keys_else_from_where_the_server_is() {
        let mut search = crate::config::SearchConfig::default();
        let api = RequestLimits::for_server(&search, "https://api.openai.com/v1", false);
        assert_eq!(api, RequestLimits { request_timeout: REMOTE_REQUEST_TIMEOUT, concurrency: REMOTE_CONCURRENCY });
        let local = RequestLimits::for_server(&search, "http://127.0.0.1:8000/v1", false);
        assert_eq!(local, RequestLimits { request_timeout: LOCAL_SERVER_REQUEST_TIMEOUT, concurrency: LOCAL_SERVER_CONCURRENCY });
        assert_eq!(RequestLimits::for_server(&search, "https://ollama.example:11434", true).concurrency, 1);
        search.sync.embedding_batch_timeout_seconds = Some(45);
        search.remote.non_batch_concurrency = Some(3);
        let set = RequestLimits::for_server(&search, "http://127.0.0.1:8000/v1", true);
        assert_eq!(set, RequestLimits { request_timeout: Duration::from_secs(45), concurrency: 3 });
    }
}
