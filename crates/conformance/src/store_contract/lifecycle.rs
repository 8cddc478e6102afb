//! The checks of an index's life across handles: staging and promote beside the live index, and the writer
//! lock, exclusive and waiting off the async runtime.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use memory_core::store::{IndexStorage, Scope};
use memory_core::{ErrorKind, Source};

use super::fixtures::{file, identity, paths, query, set, upserts};
use super::{step, CheckResult, StoreHarness, Verdict};

/// A rebuild fills a staging store while the live one keeps answering; promote makes it live for this handle
/// and for new ones; a new staging store starts empty (leftovers discarded).
pub async fn staging_and_promote_keep_the_live_index(_: &dyn StoreHarness, storage: Arc<dyn IndexStorage>, _: PathBuf) -> CheckResult {
    let live = step("open_live", storage.open_live().await)?;
    step("apply to live", live.apply(upserts(vec![file(Source::Memory, "old.md", &["walrus"], 1)])).await)?;
    step("set_identity on live", live.set_identity(&identity(None)).await)?;

    let leftover = step("open_staging", storage.open_staging().await)?;
    step("apply to a staging store", leftover.apply(upserts(vec![file(Source::Memory, "leftover.md", &["abandoned"], 1)])).await)?;
    drop(leftover);
    let staging = step("open_staging again", storage.open_staging().await)?;
    ensure!(step("counts()", staging.counts().await)? == (0, 0), "a new staging store holds a previous one's leftovers");
    ensure!(step("identity()", staging.identity().await)?.is_none(), "a new staging store has an identity");
    step("apply to staging", staging.apply(upserts(vec![file(Source::Memory, "new.md", &["narwhal"], 2)])).await)?;
    step("set_identity on staging", staging.set_identity(&identity(Some(4))).await)?;

    ensure!(paths(&*live).await? == set(&["old.md"]), "the live store changed while a rebuild was staged");
    ensure!(
        step("keyword_search()", live.keyword_search(&query("walrus"), 5, &Scope::default()).await)?.len() == 1,
        "live search stopped answering during a rebuild"
    );
    let other = step("open_live during the rebuild", storage.open_live().await)?;
    ensure!(paths(&*other).await? == set(&["old.md"]), "a new live handle sees the staging store before promote");

    let promoted = step("promote", storage.promote(live, staging).await)?;
    ensure!(paths(&*promoted).await? == set(&["new.md"]), "the promoted store does not hold the rebuilt index");
    ensure!(step("identity()", promoted.identity().await)? == Some(identity(Some(4))), "the promoted store lost the rebuilt identity");
    ensure!(
        step("keyword_search()", promoted.keyword_search(&query("narwhal"), 5, &Scope::default()).await)?.len() == 1,
        "the promoted store does not search"
    );
    let fresh = step("open_live after promote", storage.open_live().await)?;
    ensure!(paths(&*fresh).await? == set(&["new.md"]), "a new live handle does not see the promoted index");
    step("destroy", storage.destroy().await)?;
    let after = step("open_live after destroy", storage.open_live().await)?;
    ensure!(step("counts()", after.counts().await)? == (0, 0), "destroy left index data behind");
    Ok(Verdict::Passed)
}

/// One writer at a time across handles: a second `writer_lock(false)` is `Unavailable`, `writer_lock(true)`
/// waits until the first guard drops, and it waits without blocking the async runtime it runs on.
///
/// It runs on a one-thread runtime of its own, on its own thread: a wait that blocked that thread would stall
/// the check itself, which the caller's timeout then reports instead of hanging.
pub async fn writer_lock_is_exclusive_and_waits_off_the_runtime(harness: Arc<dyn StoreHarness>) -> CheckResult {
    let (tx, rx) = tokio::sync::oneshot::channel();
    std::thread::spawn(move || {
        let rt = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
            Ok(rt) => rt,
            Err(e) => {
                let _ = tx.send(Err(format!("cannot start a runtime: {e}")));
                return;
            }
        };
        let _ = tx.send(rt.block_on(writer_lock_on_one_thread(harness)));
    });
    match tokio::time::timeout(Duration::from_secs(60), rx).await {
        Ok(Ok(r)) => r,
        Ok(Err(_)) => Err("the check's thread panicked".into()),
        Err(_) => Err("the check did not finish in 60 s: a waiting writer_lock blocked its runtime thread".into()),
    }
}

async fn writer_lock_on_one_thread(harness: Arc<dyn StoreHarness>) -> CheckResult {
    let dir = tempfile::tempdir().map_err(|e| format!("temporary folder: {e}"))?;
    let first = step("open the storage", harness.open(dir.path()).await)?;
    let second = step("open a second handle", harness.open(dir.path()).await)?;
    let Some(guard) = step("writer_lock(wait)", first.writer_lock(true).await)? else {
        return Ok(Verdict::Skipped("writer_lock returns None: the backend serialises writers itself".into()));
    };
    match second.writer_lock(false).await {
        Err(e) if e.kind() == ErrorKind::Unavailable => {}
        Err(e) => return Err(format!("a taken lock must refuse with Unavailable, got {e}")),
        Ok(_) => return Err("two handles held the writer lock at once".into()),
    }
    let waiter = tokio::spawn(async move { second.writer_lock(true).await });
    // The runtime has one thread: these sleeps finish only if the waiting lock left it free.
    for _ in 0..5 {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    ensure!(!waiter.is_finished(), "writer_lock(true) returned while another handle held the lock");
    drop(guard);
    let second_guard = match tokio::time::timeout(Duration::from_secs(20), waiter).await {
        Ok(Ok(Ok(Some(g)))) => g,
        Ok(Ok(Ok(None))) => return Err("the second handle got no guard".into()),
        Ok(Ok(Err(e))) => return Err(format!("the waiting writer_lock failed: {e}")),
        Ok(Err(e)) => return Err(format!("the waiting task failed: {e}")),
        Err(_) => return Err("writer_lock(true) still waits 20 s after the lock was released".into()),
    };
    match first.writer_lock(false).await {
        Err(e) if e.kind() == ErrorKind::Unavailable => {}
        other => return Err(format!("the lock must be taken while the second handle holds its guard, got {:?}", other.map(|g| g.is_some()))),
    }
    drop(second_guard);
    ensure!(step("writer_lock after both released", first.writer_lock(false).await)?.is_some(), "no guard after release");
    drop(dir);
    Ok(Verdict::Passed)
}
