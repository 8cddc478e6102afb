//! The storage contract: what every [`ChunkStore`] / [`IndexStorage`] must do, checked on the store itself.
//!
//! The engine suites ([`crate::run_all`]) prove whole engines; two stores can still diverge underneath them
//! (a score sign, what an unreadable identity means) until a ranking happens to show it. These checks call the
//! traits directly, so a store author (in this repository or another) learns which promise broke:
//!
//! ```no_run
//! # use std::{path::Path, sync::Arc};
//! # use conformance::store_contract::{self, StoreHarness};
//! # use memory_core::store::IndexStorage;
//! struct Harness;
//! #[async_trait::async_trait]
//! impl StoreHarness for Harness {
//!     async fn open(&self, dir: &Path) -> memory_core::Result<Arc<dyn IndexStorage>> {
//!         Ok(Arc::new(memory_builtin::SqliteStorage::new(dir.join("index.sqlite"))))
//!     }
//! }
//! # async fn demo() {
//! store_contract::run_all(Arc::new(Harness)).await.assert_ok();
//! # }
//! ```
//!
//! Each check gets a fresh, empty folder and asks the harness for a storage in it; the writer-lock check asks
//! twice for the same folder (two handles on one index, as two processes would have).

use std::fmt::Write as _;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use memory_core::store::{ChunkStore, IndexStorage};
use memory_core::Result;

/// How the checks reach the store under test.
#[async_trait]
pub trait StoreHarness: Send + Sync + 'static {
    /// A storage whose index lives in `dir` (empty on the first call for a folder). Called twice with the same
    /// folder, it must return two handles on the same index.
    async fn open(&self, dir: &Path) -> Result<Arc<dyn IndexStorage>>;

    /// Overwrite the stored identity of the index in `dir` (`store` is its open live handle) with something this
    /// code cannot read (what a newer version, a torn write or a foreign tool leaves). `None`: the store keeps
    /// the identity typed and cannot hold an unreadable one, so the check does not apply.
    async fn write_unreadable_identity(&self, _dir: &Path, _store: &dyn ChunkStore) -> Option<Result<()>> {
        None
    }

    /// Run now, on the index in `dir`, the maintenance the store otherwise runs on its own schedule (compaction,
    /// index optimisation): checks that compare what a store settles to call it first. A store that keeps every
    /// statistic exact at each write has nothing to do.
    async fn settle(&self, _dir: &Path) -> Result<()> {
        Ok(())
    }
}

/// What one check found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// The store did what the contract says.
    Passed,
    /// Not applicable to this store, with the reason (printed: nothing is passed silently).
    Skipped(String),
    /// It did not: what was expected and what came.
    Failed(String),
}

/// The verdict of every check, in run order.
#[derive(Debug, Default)]
pub struct ContractReport {
    /// Each check's name and verdict.
    pub checks: Vec<(&'static str, Verdict)>,
}

impl ContractReport {
    /// The checks that failed.
    pub fn failed(&self) -> Vec<&'static str> {
        self.checks.iter().filter(|(_, v)| matches!(v, Verdict::Failed(_))).map(|(n, _)| *n).collect()
    }

    /// The checks skipped, as not applicable.
    pub fn skipped(&self) -> Vec<&'static str> {
        self.checks.iter().filter(|(_, v)| matches!(v, Verdict::Skipped(_))).map(|(n, _)| *n).collect()
    }

    /// No check failed.
    pub fn is_ok(&self) -> bool {
        self.failed().is_empty()
    }

    /// One line per check, for a test's failure message.
    pub fn render(&self) -> String {
        let mut out = String::new();
        for (name, v) in &self.checks {
            let _ = match v {
                Verdict::Passed => writeln!(out, "ok      {name}"),
                Verdict::Skipped(why) => writeln!(out, "skipped {name}: {why}"),
                Verdict::Failed(why) => writeln!(out, "FAILED  {name}: {why}"),
            };
        }
        out
    }

    /// Panic with every failure if any check failed.
    pub fn assert_ok(&self) {
        let text = self.render();
        println!("{text}");
        assert!(self.is_ok(), "store contract failed:\n{text}");
    }
}

/// A check's outcome before it is named: `Err` carries the failure.
pub type CheckResult = std::result::Result<Verdict, String>;

macro_rules! ensure {
    ($cond:expr, $($msg:tt)+) => {
        let holds: bool = $cond;
        if !holds {
            return Err(format!($($msg)+));
        }
    };
}

/// A store error as a check failure, saying which step failed.
fn step<T>(what: &str, r: Result<T>) -> std::result::Result<T, String> {
    r.map_err(|e| format!("{what}: {e}"))
}

// The checks, by what they exercise (declared after `ensure!`, which they use).
mod fixtures;
mod lifecycle;
mod records;
mod searches;
mod writes;

pub use lifecycle::{staging_and_promote_keep_the_live_index, writer_lock_is_exclusive_and_waits_off_the_runtime};
pub use records::{
    embedding_cache_is_keyed_and_pruned_oldest_first, meta_round_trips, new_store_is_empty_and_identity_round_trips,
    unreadable_identity_is_a_corrupt_index,
};
pub use searches::{
    files_named_matches_path_name_or_stem_only, keyword_scores_are_higher_for_better_matches, keyword_scores_do_not_depend_on_earlier_writes,
    searches_honour_days, searches_honour_source_filters, stored_vectors_round_trip,
};
pub use writes::{
    append_keeps_the_old_chunks, apply_is_all_or_nothing, removal_drops_the_file_and_its_chunks, touch_updates_only_the_record,
    upsert_replaces_a_files_chunks,
};

/// Run every check of the contract, each on a fresh folder.
pub async fn run_all(harness: Arc<dyn StoreHarness>) -> ContractReport {
    let h = harness.as_ref();
    let mut report = ContractReport::default();
    macro_rules! run {
        ($name:ident) => {
            report.checks.push((stringify!($name), verdict(fresh(h, $name).await)));
        };
    }
    run!(new_store_is_empty_and_identity_round_trips);
    run!(apply_is_all_or_nothing);
    run!(upsert_replaces_a_files_chunks);
    run!(append_keeps_the_old_chunks);
    run!(touch_updates_only_the_record);
    run!(removal_drops_the_file_and_its_chunks);
    run!(keyword_scores_are_higher_for_better_matches);
    run!(keyword_scores_do_not_depend_on_earlier_writes);
    run!(searches_honour_source_filters);
    run!(searches_honour_days);
    run!(files_named_matches_path_name_or_stem_only);
    run!(stored_vectors_round_trip);
    run!(embedding_cache_is_keyed_and_pruned_oldest_first);
    run!(meta_round_trips);
    run!(unreadable_identity_is_a_corrupt_index);
    run!(staging_and_promote_keep_the_live_index);
    report.checks.push((
        "writer_lock_is_exclusive_and_waits_off_the_runtime",
        verdict(writer_lock_is_exclusive_and_waits_off_the_runtime(harness.clone()).await),
    ));
    report
}

fn verdict(r: CheckResult) -> Verdict {
    r.unwrap_or_else(Verdict::Failed)
}

/// Run `check` on a storage in a new temporary folder.
async fn fresh<'h, F, Fut>(h: &'h dyn StoreHarness, check: F) -> CheckResult
where
    F: FnOnce(&'h dyn StoreHarness, Arc<dyn IndexStorage>, PathBuf) -> Fut,
    Fut: Future<Output = CheckResult> + 'h,
{
    let dir = tempfile::tempdir().map_err(|e| format!("temporary folder: {e}"))?;
    let storage = step("open the storage", h.open(dir.path()).await)?;
    let result = check(h, storage, dir.path().to_path_buf()).await;
    drop(dir);
    result
}
