//! Keep the index in step with the memory files while the process runs (`memory watch`, `memory serve`).
//!
//! The changes come from the engine's own change journal when it has one (`MemoryBackend::watch_changes`: the
//! builtin and LanceDB engines), so one set of watches serves its searches' freshness check and this watcher;
//! otherwise (QMD) from watches of the watcher's own, the same mechanism (`ChangeFeed::watch`) over the same
//! folders: the workspace root (`MEMORY.md`, `memory/`), `memory/` and every extra path (their folders while they
//! do not exist yet) and the transcripts folder. Changes are coalesced until the files have been quiet for the
//! debounce period (`memory.search.sync.watchDebounceMs`, 1.5 s by default), or at the latest `MAX_WAIT_FACTOR`
//! debounce periods after the first change of a burst, then ONE incremental sync runs (unchanged files cost a
//! stat). Changes seen while a sync runs schedule one more sync after it. An interval (`sync.intervalMinutes`)
//! syncs too. A sync that left files waiting for embeddings (the provider failed: a network blip, an API outage, a
//! local model folder away) schedules another after [`PENDING_RETRY_FIRST`], then twice as long each time up to
//! [`PENDING_RETRY_MAX`], until none waits: what was written meanwhile gets its vectors once the provider answers
//! again, without a file change or a restart.
//!
//! The changed paths of a burst are handed to the engine first (`MemoryBackend::notify_changed`): it checks them by
//! content before its next search, alone when its own change journal vouches for every other file.
//!
//! Syncs run on a blocking thread of their own, so the async tasks that answer searches (the MCP server) are never
//! stuck behind one. The watcher only makes searches cheaper: each search checks the files itself first
//! (`sync.onSearch`), so what was just written is found even before the debounce has passed.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use memory_core::changes::ChangeStream;
use memory_core::discovery::{ChangeFeed, MemoryRoots};
use memory_core::{MemoryBackend, SyncOptions, SyncReport};
use serde::Serialize;
use tracing::{debug, info, warn};

/// Under a never-ending stream of changes, sync at least every `debounce x MAX_WAIT_FACTOR`.
pub const MAX_WAIT_FACTOR: u32 = 10;

/// At most this many changed paths of one burst are handed to the engine (a bulk change is synced whole anyway).
const MAX_ANNOUNCED: usize = 1024;

/// How long after a sync that left files waiting for embeddings the watcher syncs again (see the module docs).
pub const PENDING_RETRY_FIRST: Duration = Duration::from_secs(30);
/// The longest wait between such syncs: an outage that lasts costs one sync every ten minutes.
pub const PENDING_RETRY_MAX: Duration = Duration::from_secs(600);

#[derive(Debug, Clone)]
pub struct WatchOptions {
    pub debounce: Duration,
    /// Sync on this period too (`sync.intervalMinutes`); `None` for no interval.
    pub interval: Option<Duration>,
    /// Sync once when the watcher starts (`sync.onSessionStart`).
    pub initial_sync: bool,
    /// Run that first sync in the background instead of before [`spawn`] returns (the MCP server answers at once;
    /// its searches check the files themselves meanwhile).
    pub initial_sync_in_background: bool,
    /// The first and the longest wait before syncing again for files waiting for embeddings.
    pub pending_retry: (Duration, Duration),
}

impl WatchOptions {
    pub fn from_config(sync: &memory_core::config::SyncConfig) -> WatchOptions {
        WatchOptions {
            debounce: Duration::from_millis(sync.watch_debounce_ms.max(10)),
            interval: (sync.interval_minutes > 0).then(|| Duration::from_secs(sync.interval_minutes.saturating_mul(60))),
            initial_sync: sync.on_session_start,
            initial_sync_in_background: false,
            pending_retry: (PENDING_RETRY_FIRST, PENDING_RETRY_MAX),
        }
    }

    fn max_wait(&self) -> Duration {
        (self.debounce * MAX_WAIT_FACTOR).max(Duration::from_secs(1))
    }
}

/// What the watcher watches when the engine has no journal to share: what discovery indexes.
#[derive(Debug, Clone)]
pub struct WatchTargets {
    /// The workspace and the extra paths, with `media` set from `multimodal.enabled`.
    pub roots: MemoryRoots,
    /// The transcripts folder, when the `sessions` source is on.
    pub sessions_dir: Option<PathBuf>,
}

impl WatchTargets {
    /// What discovery indexes in `space` under `search`: its roots, and its transcripts folder when the
    /// `sessions` source is on.
    pub fn of(space: &memory_core::space::AgentSpace, search: &memory_core::config::SearchConfig) -> WatchTargets {
        let sessions_on = search.sources.contains(&memory_core::Source::Sessions);
        WatchTargets {
            roots: MemoryRoots::for_search(space.workspace(), search),
            sessions_dir: sessions_on.then(|| space.sessions_dir().to_path_buf()),
        }
    }

    /// Watches of the watcher's own over these folders.
    fn watch(&self) -> anyhow::Result<Box<dyn ChangeStream>> {
        ChangeFeed::watch(&self.roots, self.sessions_dir.as_deref())
            .map(|feed| Box::new(feed) as Box<dyn ChangeStream>)
            .map_err(|e| anyhow::anyhow!("cannot watch the memory files under {}: {e}", self.roots.workspace.display()))
    }
}

/// Why a sync ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Trigger {
    Start,
    Files,
    Interval,
    /// Files were waiting for embeddings.
    Pending,
}

/// One sync the watcher ran.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SyncEvent {
    /// 1, 2, 3...: syncs run by this watcher.
    pub seq: u64,
    pub trigger: Trigger,
    /// Changes to memory files coalesced into this sync (several writes to one file are several).
    pub changes: usize,
    /// A few of the changed paths.
    pub paths: Vec<String>,
    pub took_ms: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub report: Option<SyncReport>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

pub type OnSync = Arc<dyn Fn(&SyncEvent) + Send + Sync>;

/// A running watcher. Dropping it (or [`WatchHandle::stop`]) stops it.
pub struct WatchHandle {
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl WatchHandle {
    /// Stop watching; waits for a sync in progress to finish.
    pub async fn stop(mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(t) = self.task.take() {
            let _ = t.await;
        }
    }
}

impl Drop for WatchHandle {
    fn drop(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
    }
}

/// Start watching. Returns once the watches are in place and, with `initial_sync`, the first sync is done.
pub async fn spawn(engine: Arc<dyn MemoryBackend>, targets: WatchTargets, options: WatchOptions, on_sync: OnSync) -> anyhow::Result<WatchHandle> {
    let feed = match engine.watch_changes() {
        Some(feed) => {
            debug!("fed by the engine's change journal");
            feed
        }
        None => targets.watch()?,
    };
    info!(workspace = %targets.roots.workspace.display(), extra = targets.roots.extra_paths.len(), "watching memory files");
    let mut state = Loop { engine, targets, options, on_sync, seq: 0, pending: None };
    if state.options.initial_sync && !state.options.initial_sync_in_background {
        state.sync(Trigger::Start, 0, Vec::new()).await;
    }
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel();
    let task = tokio::spawn(state.run(feed, stop_rx));
    Ok(WatchHandle { stop: Some(stop_tx), task: Some(task) })
}

struct Loop {
    engine: Arc<dyn MemoryBackend>,
    targets: WatchTargets,
    options: WatchOptions,
    on_sync: OnSync,
    seq: u64,
    /// While files wait for embeddings: the wait before the next sync for them, and when that sync is due.
    pending: Option<(Duration, Instant)>,
}

impl Loop {
    async fn run(mut self, feed: Box<dyn ChangeStream>, mut stop: tokio::sync::oneshot::Receiver<()>) {
        if self.options.initial_sync && self.options.initial_sync_in_background {
            self.sync(Trigger::Start, 0, Vec::new()).await;
        }
        let mut feed = Some(feed);
        let debounce = self.options.debounce;
        let max_wait = self.options.max_wait();
        let mut interval = self.options.interval.map(|p| {
            let mut i = tokio::time::interval_at(tokio::time::Instant::now() + p, p);
            i.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            i
        });
        let mut changes = 0usize;
        let mut paths: Vec<String> = Vec::new();
        let mut changed: Vec<PathBuf> = Vec::new();
        let mut first: Option<Instant> = None;
        let mut last = Instant::now();
        loop {
            let deadline = match first {
                Some(f) => (last + debounce).min(f + max_wait),
                None => Instant::now() + Duration::from_secs(3600),
            };
            tokio::select! {
                _ = &mut stop => break,
                heard = async { match feed.as_mut() { Some(f) => f.next().await, None => std::future::pending().await } }, if feed.is_some() => {
                    match heard {
                        Some(heard) => {
                            changes = changes.saturating_add(heard.events);
                            for p in heard.paths {
                                if paths.len() < 8 {
                                    let shown = p.strip_prefix(&self.targets.roots.workspace).unwrap_or(&p).display().to_string();
                                    if !paths.contains(&shown) {
                                        paths.push(shown);
                                    }
                                }
                                if changed.len() < MAX_ANNOUNCED {
                                    changed.push(p);
                                }
                            }
                        }
                        None => {
                            // The journal's watches failed (they could not be re-armed): new ones, and a sync for
                            // what may have changed meanwhile.
                            feed = match self.targets.watch() {
                                Ok(f) => {
                                    warn!("the change journal failed; watching with new watches");
                                    Some(f)
                                }
                                Err(e) => {
                                    warn!(error = %e, "file watching stopped; the index follows the files at each search and interval");
                                    None
                                }
                            };
                            changes += 1;
                        }
                    }
                    last = Instant::now();
                    first.get_or_insert(last);
                }
                _ = tokio::time::sleep_until(deadline.into()), if first.is_some() => {
                    let n = std::mem::take(&mut changes);
                    let p = std::mem::take(&mut paths);
                    first = None;
                    // The engine hears which files changed (it checks them by content before its next search),
                    // then syncs.
                    changed.sort_unstable();
                    changed.dedup();
                    self.engine.notify_changed(&std::mem::take(&mut changed));
                    self.sync(Trigger::Files, n, p).await;
                }
                _ = async { match interval.as_mut() { Some(i) => i.tick().await, None => std::future::pending().await } }, if interval.is_some() => {
                    self.sync(Trigger::Interval, 0, Vec::new()).await;
                }
                _ = tokio::time::sleep_until(self.pending.map_or_else(Instant::now, |(_, at)| at).into()), if self.pending.is_some() => {
                    self.sync(Trigger::Pending, 0, Vec::new()).await;
                }
            }
        }
        debug!("watcher stopped");
    }

    async fn sync(&mut self, trigger: Trigger, changes: usize, paths: Vec<String>) {
        self.seq += 1;
        let started = Instant::now();
        let engine = self.engine.clone();
        let handle = tokio::runtime::Handle::current();
        // On a blocking thread: the engine's SQLite work must not occupy the runtime's workers.
        // Searches share the index meanwhile: a provider that stopped answering holds it for one call's wait.
        let result = tokio::task::spawn_blocking(move || handle.block_on(engine.sync(SyncOptions::beside_searches()))).await;
        let (report, error) = match result {
            Ok(Ok(r)) => (Some(r), None),
            Ok(Err(e)) => (None, Some(e.to_string())),
            Err(e) => (None, Some(format!("sync task failed: {e}"))),
        };
        let event = SyncEvent { seq: self.seq, trigger, changes, paths, took_ms: started.elapsed().as_millis() as u64, report, error };
        self.pending = next_pending_retry(self.pending, trigger, event.report.as_ref(), self.options.pending_retry, Instant::now());
        match (&event.report, &event.error) {
            (Some(r), _) => info!(
                seq = event.seq,
                trigger = ?trigger,
                changes,
                added = r.files_added,
                changed = r.files_changed,
                removed = r.files_removed,
                pending = r.files_pending,
                took_ms = event.took_ms,
                "sync"
            ),
            (_, Some(e)) => warn!(seq = event.seq, error = %e, "sync failed; the index keeps answering as it was"),
            _ => {}
        }
        (self.on_sync)(&event);
    }
}

/// The wait before the next sync for files waiting for embeddings, after a sync: none when its report says none
/// waits; `first` after the first sync that left some; twice the last wait (at most `max`) after each retry that
/// left some again or failed. A sync for changed files during the wait keeps the retry as it was scheduled: the
/// outage it met is the one the retry is waiting out, and its doubling would put off the retry after the provider
/// is back. Returns the wait and when the retry is due.
fn next_pending_retry(
    scheduled: Option<(Duration, Instant)>,
    trigger: Trigger,
    report: Option<&SyncReport>,
    (first, max): (Duration, Duration),
    now: Instant,
) -> Option<(Duration, Instant)> {
    let waiting = match report {
        Some(r) => r.files_pending > 0,
        // A failed sync says nothing new: files that waited still wait.
        None => scheduled.is_some(),
    };
    if !waiting {
        return None;
    }
    match (trigger, scheduled) {
        (Trigger::Pending, Some((wait, _))) => Some(((wait * 2).min(max), now + (wait * 2).min(max))),
        (_, Some(kept)) => Some(kept),
        (_, None) => Some((first, now + first)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use memory_core::locks::LockExt;
    use std::path::Path;
    use std::sync::Mutex;

    use memory_core::discovery::ChangeJournal;
    use tokio::sync::mpsc;

    use memory_core::{Capabilities, GetRequest, GetResponse, SearchRequest, SearchResponse, Status};

    /// An engine that records what it is told and syncs nothing; with a journal, it feeds the watcher from it.
    #[derive(Default)]
    struct Recording {
        announced: Mutex<Vec<PathBuf>>,
        journal: Option<ChangeJournal>,
        /// The files each sync reports waiting for embeddings, in turn (then none).
        pending: Mutex<Vec<usize>>,
    }

    #[async_trait::async_trait]
    impl MemoryBackend for Recording {
        fn name(&self) -> &str {
            "recording"
        }
        fn capabilities(&self) -> Capabilities {
            Capabilities::default()
        }
        async fn search(&self, _request: &SearchRequest) -> memory_core::Result<SearchResponse> {
            Ok(SearchResponse::default())
        }
        async fn get(&self, _request: &GetRequest) -> memory_core::Result<GetResponse> {
            Err(memory_core::MemoryError::InvalidInput("not here".into()))
        }
        async fn sync(&self, _options: SyncOptions) -> memory_core::Result<SyncReport> {
            let mut pending = self.pending.locked();
            let files_pending = if pending.is_empty() { 0 } else { pending.remove(0) };
            Ok(SyncReport { files_pending, ..SyncReport::default() })
        }
        async fn status(&self) -> memory_core::Result<Status> {
            Ok(Status::default())
        }
        fn notify_changed(&self, paths: &[PathBuf]) {
            self.announced.locked().extend_from_slice(paths);
        }
        fn watch_changes(&self) -> Option<Box<dyn ChangeStream>> {
            self.journal.as_ref().map(|j| Box::new(j.subscribe().unwrap()) as Box<dyn ChangeStream>)
        }
        async fn close(&self) -> memory_core::Result<()> {
            Ok(())
        }
    }

    fn workspace() -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let ws = std::fs::canonicalize(dir.path()).unwrap();
        std::fs::create_dir_all(ws.join("memory")).unwrap();
        (dir, ws)
    }

    /// Starts watching for `engine` with a short debounce; each sync sends what the engine was told so far.
    async fn watch(engine: Arc<Recording>, ws: &Path) -> (WatchHandle, mpsc::UnboundedReceiver<Vec<PathBuf>>) {
        let (tx, rx) = mpsc::unbounded_channel::<Vec<PathBuf>>();
        let seen = engine.clone();
        let on_sync: OnSync = Arc::new(move |_ev: &SyncEvent| {
            let _ = tx.send(seen.announced.locked().clone());
        });
        let targets = WatchTargets { roots: MemoryRoots::new(ws, &[] as &[String]), sessions_dir: None };
        (spawn(engine, targets, quick(), on_sync).await.unwrap(), rx)
    }

    fn quick() -> WatchOptions {
        WatchOptions {
            debounce: Duration::from_millis(50),
            interval: None,
            initial_sync: false,
            initial_sync_in_background: false,
            pending_retry: (Duration::from_millis(100), Duration::from_millis(300)),
        }
    }

    #[test]
    fn files_waiting_for_embeddings_are_synced_again_later_and_later() {
        let limits = (Duration::from_secs(30), Duration::from_secs(600));
        let waiting = SyncReport { files_pending: 2, ..SyncReport::default() };
        let done = SyncReport::default();
        let now = Instant::now();
        let next = |s, t, r| next_pending_retry(s, t, r, limits, now);
        let mut scheduled = next(None, Trigger::Files, Some(&waiting));
        let mut waits = vec![scheduled.unwrap().0.as_secs()];
        for _ in 0..6 {
            scheduled = next(scheduled, Trigger::Pending, Some(&waiting));
            waits.push(scheduled.unwrap().0.as_secs());
        }
        assert_eq!(waits, [30, 60, 120, 240, 480, 600, 600], "each retry that leaves files waiting waits longer");
        let first = next(None, Trigger::Start, Some(&waiting));
        assert_eq!(next(first, Trigger::Files, Some(&waiting)), first, "a sync for changed files keeps the retry's time");
        assert_eq!(next(first, Trigger::Pending, None).map(|s| s.0), Some(limits.0 * 2), "a failed retry waits longer");
        assert_eq!(next(None, Trigger::Files, None), None, "a failed sync starts no wait");
        assert_eq!(next(first, Trigger::Pending, Some(&done)), None, "none waits");
        assert_eq!(next(first, Trigger::Files, Some(&done)), None, "none waits");
    }

    /// A sync that leaves files waiting for embeddings is followed by more, with no file changing, until none waits.
    #[tokio::test]
    async fn the_watcher_syncs_again_while_files_wait_for_embeddings() {
        let (_dir, ws) = workspace();
        let engine = Arc::new(Recording { pending: Mutex::new(vec![3, 3, 1]), ..Recording::default() });
        let (tx, mut rx) = mpsc::unbounded_channel::<(Trigger, usize)>();
        let on_sync: OnSync = Arc::new(move |ev: &SyncEvent| {
            let _ = tx.send((ev.trigger, ev.report.as_ref().map_or(0, |r| r.files_pending)));
        });
        let targets = WatchTargets { roots: MemoryRoots::new(&ws, &[] as &[String]), sessions_dir: None };
        let handle = spawn(engine, targets, WatchOptions { initial_sync: true, ..quick() }, on_sync).await.unwrap();
        let mut seen = Vec::new();
        while seen.len() < 4 {
            seen.push(tokio::time::timeout(Duration::from_secs(20), rx.recv()).await.expect("a sync within 20 s").unwrap());
        }
        let want = [(Trigger::Start, 3), (Trigger::Pending, 3), (Trigger::Pending, 1), (Trigger::Pending, 0)];
        assert_eq!(seen, want);
        // None waits any more: no further sync.
        assert!(tokio::time::timeout(Duration::from_millis(800), rx.recv()).await.is_err(), "synced again with nothing waiting");
        handle.stop().await;
    }

    /// What the engine was told by the next sync.
    async fn next_sync(rx: &mut mpsc::UnboundedReceiver<Vec<PathBuf>>) -> Vec<PathBuf> {
        tokio::time::timeout(Duration::from_secs(20), rx.recv()).await.expect("a sync within 20 s").unwrap()
    }

    /// Writes `note` and `unheard` (a file the watcher must not hear of): the next sync names `note` alone.
    async fn announces_only(rx: &mut mpsc::UnboundedReceiver<Vec<PathBuf>>, note: &Path, unheard: &Path) {
        std::fs::write(note, "a note\n").unwrap();
        std::fs::write(unheard, "not heard of\n").unwrap();
        assert_eq!(next_sync(rx).await, [note]);
    }

    /// The watcher tells the engine which memory files changed before it syncs (and not the files that are none).
    /// This engine has no journal to share: the watcher watches on its own (QMD's case).
    #[tokio::test]
    async fn the_engine_hears_the_changed_paths_before_the_sync() {
        let (_dir, ws) = workspace();
        let (handle, mut rx) = watch(Arc::new(Recording::default()), &ws).await;
        announces_only(&mut rx, &ws.join("memory/notes.md"), &ws.join("memory/scratch.txt")).await;
        handle.stop().await;
    }

    /// A watcher of one workspace for an engine whose journal watches another, to tell their watches apart.
    #[cfg(target_os = "linux")]
    struct Apart {
        _dirs: [tempfile::TempDir; 2],
        ws: PathBuf,
        engine_ws: PathBuf,
        handle: WatchHandle,
        rx: mpsc::UnboundedReceiver<Vec<PathBuf>>,
    }

    #[cfg(target_os = "linux")]
    impl Apart {
        async fn watch() -> Apart {
            let (dir, ws) = workspace();
            let (other, engine_ws) = workspace();
            let journal = ChangeJournal::start(&MemoryRoots::new(&engine_ws, &[] as &[String]), None).unwrap();
            let (handle, rx) = watch(Arc::new(Recording { journal: Some(journal), ..Recording::default() }), &ws).await;
            Apart { _dirs: [dir, other], ws, engine_ws, handle, rx }
        }
    }

    /// An engine with a change journal feeds the watcher from it: no watches of the watcher's own. (Here the
    /// engine's journal watches another workspace than the watcher's targets, to tell the two apart.)
    #[cfg(target_os = "linux")]
    #[tokio::test]
    async fn the_engine_s_journal_feeds_the_watcher() {
        let Apart { ws, engine_ws, handle, mut rx, _dirs } = Apart::watch().await;
        announces_only(&mut rx, &engine_ws.join("memory/notes.md"), &ws.join("memory/unwatched.md")).await;
        handle.stop().await;
    }

    /// When the engine's journal fails (its workspace went away, so its watches cannot be re-armed), the watcher
    /// syncs for what it may have missed and goes on with watches of its own.
    #[cfg(target_os = "linux")]
    #[tokio::test]
    async fn the_watcher_outlives_a_failed_journal() {
        let Apart { ws, engine_ws, handle, mut rx, _dirs } = Apart::watch().await;
        std::fs::remove_dir_all(&engine_ws).unwrap();
        next_sync(&mut rx).await;
        std::fs::write(ws.join("memory/notes.md"), "a note\n").unwrap();
        let announced = next_sync(&mut rx).await;
        assert!(announced.contains(&ws.join("memory/notes.md")), "{announced:?}");
        handle.stop().await;
    }
}
