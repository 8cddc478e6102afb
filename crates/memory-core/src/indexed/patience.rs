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

use std::future::Future;
use std::sync::Mutex;
use std::time::Duration;

// Tokio's clock, so that the tests can run it forward.
use tokio::time::Instant;

use crate::embedding::EmbeddingError;
use crate::types::EmbedWait;

/// The longest a search or an append waits for the embedding provider (its sync's vectors and the query's).
pub const EMBED_WAIT: Duration = Duration::from_secs(5);

/// The longest one provider call of a background sync beside searches may take: a healthy provider answers a
/// request (at most ~8,000 tokens) in seconds, a local model a batch in a few.
pub const CALL_WAIT: Duration = Duration::from_secs(30);

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
        let last = self.slow_failure.lock().unwrap_or_else(|e| e.into_inner());
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
        let mut last = self.slow_failure.lock().unwrap_or_else(|e| e.into_inner());
        match &outcome {
            Ok(_) => *last = None,
            Err(why) if started.elapsed() >= SLOW_FAILURE || deadline.is_some_and(|d| Instant::now() >= d) => {
                *last = Some((Instant::now(), why.clone()));
            }
            Err(_) => {}
        }
        outcome
    }
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
}
