//! The call timeout: a primary that hangs costs one bounded wait, after which the call counts as a failure and
//! the fallback answers ([`super::FallbackPolicy::call_timeout`]).

use std::future::Future;
use std::time::Duration;

use crate::error::{MemoryError, Result};

/// `fut` bounded by `limit` (`None`: no bound). Running out of time is an `Unavailable` failure of `engine`, so it
/// falls back like any other "cannot answer now".
pub(super) async fn bounded<T>(limit: Option<Duration>, engine: &str, fut: impl Future<Output = Result<T>>) -> Result<T> {
    match limit {
        Some(limit) => tokio::time::timeout(limit, fut)
            .await
            .unwrap_or_else(|_| Err(MemoryError::Unavailable(format!("memory engine `{engine}` did not answer within {limit:?}")))),
        None => fut.await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorKind;

    async fn answer_after(wait: Duration) -> Result<&'static str> {
        tokio::time::sleep(wait).await;
        Ok("answer")
    }

    #[tokio::test]
    async fn an_answer_within_the_limit_is_the_answer() {
        let r = bounded(Some(Duration::from_secs(5)), "qmd", answer_after(Duration::ZERO)).await;
        assert_eq!(r.unwrap(), "answer");
        // The call's own error is kept as it is.
        let e = bounded(Some(Duration::from_secs(5)), "qmd", async { Err::<(), _>(MemoryError::Refused("no".into())) }).await;
        assert_eq!(e.unwrap_err().kind(), ErrorKind::Refused);
    }

    #[tokio::test]
    async fn a_late_answer_is_an_unavailable_engine_naming_it_and_the_limit() {
        let t = std::time::Instant::now();
        let e = bounded(Some(Duration::from_millis(20)), "qmd", answer_after(Duration::from_secs(30))).await.unwrap_err();
        assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
        assert_eq!(e.kind(), ErrorKind::Unavailable);
        assert!(e.to_string().contains("memory engine `qmd` did not answer within 20ms"), "{e}");
    }

    #[tokio::test]
    async fn without_a_limit_the_call_is_awaited() {
        let r = bounded(None, "qmd", answer_after(Duration::from_millis(30))).await;
        assert_eq!(r.unwrap(), "answer");
    }
}
