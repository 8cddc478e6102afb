//! A change journal over the folders discovery walks: the one watch of a process over the memory files. It tells
//! a long-lived engine, without a stat per memory file, that nothing changed since its last freshness check, and
//! feeds a watcher ([`ChangeFeed`], the CLI's `memory watch` and `memory serve`) the files that changed.
//!
//! The freshness check trusts it on Linux only (inotify): the kernel queues an event before the `write`, `rename`
//! or `unlink` that caused it returns, so draining the queue at the start of a search sees every change made
//! before the search was asked for. Elsewhere [`ChangeJournal::start`] returns `None` and every search checks the
//! files themselves; a watcher's own feed ([`ChangeFeed::watch`]) then uses the `notify` crate's watcher, whose
//! events arrive later on a thread of their own.
//!
//! Events are drained under one lock, by a search ([`ChangeJournal::take_changes`]), by a feed's reader, or by
//! the thread that waits for them while a feed is subscribed; every drain records each change both for the
//! freshness check and for every feed, so none is lost to either.
//!
//! The journal errs on the side of "changed": an event it cannot place, a folder created, moved or removed, a
//! watched folder itself moved or deleted, or a lost event queue all answer `true` and re-arm the watches from
//! scratch (the full check that follows finds whatever happened in between). What it cannot see, it must not be
//! trusted for: changes made through a network file system by another machine, or to a file written through a
//! memory map that is never closed. Hosts on such file systems turn the check's shortcut off by keeping searches
//! one-shot, or announce changes with `MemoryBackend::notify_changed`.

use crate::locks::LockExt;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use super::MemoryRoots;

#[cfg(target_os = "linux")]
mod inotify;
#[cfg(any(not(target_os = "linux"), test))]
mod portable;
#[cfg(all(test, target_os = "linux"))]
mod tests;

/// At most this many changed files are remembered for a reader between two takes (past the cap, a check lists
/// every file and a watcher's sync covers every file anyway).
const MAX_FILES: usize = 1024;

/// What an event means: this memory file changed (`Some`), or something no one file name covers changed (a folder
/// created, moved or removed, an event that cannot be placed, lost events: `None`).
type Change = Option<PathBuf>;

/// The journal of a long-lived engine.
pub struct ChangeJournal {
    shared: Arc<Shared>,
}

impl ChangeJournal {
    /// Watch what discovery walks under `roots`, and the transcripts folder. `None` where the platform has no
    /// events a search can trust or the watches cannot be set (too many watches, no inotify instance left): the
    /// caller then checks every file, as without a journal.
    pub fn start(roots: &MemoryRoots, sessions_dir: Option<&Path>) -> Option<ChangeJournal> {
        #[cfg(target_os = "linux")]
        {
            match Shared::start_inotify(roots, sessions_dir) {
                Ok(shared) => Some(ChangeJournal { shared }),
                Err(e) => {
                    tracing::debug!(error = %e, "no change journal; every search checks the files");
                    None
                }
            }
        }
        #[cfg(not(target_os = "linux"))]
        {
            let _ = (roots, sessions_dir);
            None
        }
    }

    /// `Ok(true)` when a memory file, a folder of them or the transcripts may have changed since the last call
    /// (or since [`start`](Self::start)); `Ok(false)` when certainly nothing did. An error means the journal
    /// can no longer tell: drop it (its feeds end too).
    pub fn take_changes(&self) -> io::Result<bool> {
        let mut state = self.shared.drain()?;
        Ok(std::mem::take(&mut state.fresh.events) > 0)
    }

    /// The memory files the events taken so far named (written, created, moved, removed), since the last call:
    /// the next check looks at each of them whatever its size and times say, and only at them when the
    /// list is [complete](ChangedFiles::complete).
    pub fn take_changed_files(&self) -> ChangedFiles {
        let mut state = self.shared.state.locked();
        let fresh = std::mem::take(&mut state.fresh);
        ChangedFiles { events: 0, paths: fresh.paths, complete: !fresh.incomplete }
    }

    /// A feed of this journal's changes from now on (a watcher's): the same watches serve both.
    pub fn subscribe(&self) -> io::Result<ChangeFeed> {
        ChangeFeed::subscribe(self.shared.clone())
    }
}

pub use memory_contract::changes::ChangedFiles;

/// The changes one reader has not taken yet.
#[derive(Default)]
struct Unread {
    events: usize,
    paths: Vec<PathBuf>,
    /// A change is not in `paths` (no name, or past the cap).
    incomplete: bool,
}

impl Unread {
    fn add(&mut self, change: &Change) {
        self.events = self.events.saturating_add(1);
        match change {
            Some(p) if self.paths.len() < MAX_FILES => self.paths.push(p.clone()),
            _ => self.incomplete = true,
        }
    }
}

/// The watches and what they saw, behind one lock.
struct Shared {
    state: Mutex<State>,
    feeds: Arc<Feeds>,
}

struct State {
    backend: Backend,
    /// What the freshness check has not taken yet.
    fresh: Unread,
    /// A thread waits for the backend's events (while a feed is subscribed to a backend that needs one).
    #[cfg(target_os = "linux")]
    waiting: bool,
    /// The watches failed: the journal can no longer tell.
    failed: bool,
}

enum Backend {
    #[cfg(target_os = "linux")]
    Inotify(inotify::Watches),
    #[cfg(any(not(target_os = "linux"), test))]
    Portable(portable::Watches),
}

impl Backend {
    /// The descriptor a thread waits on for events; `None` for a backend that wakes the feeds itself.
    #[cfg(target_os = "linux")]
    fn fd(&self) -> Option<std::os::fd::RawFd> {
        match self {
            Backend::Inotify(w) => Some(w.fd()),
            #[cfg(test)]
            Backend::Portable(_) => None,
        }
    }
}

impl Shared {
    #[cfg(target_os = "linux")]
    fn start_inotify(roots: &MemoryRoots, sessions_dir: Option<&Path>) -> io::Result<Arc<Shared>> {
        let backend = Backend::Inotify(inotify::Watches::start(roots, sessions_dir)?);
        Ok(Shared::new(backend, Arc::default()))
    }

    #[cfg(any(not(target_os = "linux"), test))]
    fn start_portable(roots: &MemoryRoots, sessions_dir: Option<&Path>) -> io::Result<Arc<Shared>> {
        let feeds = Arc::<Feeds>::default();
        let backend = Backend::Portable(portable::Watches::start(roots, sessions_dir, feeds.clone())?);
        Ok(Shared::new(backend, feeds))
    }

    fn new(backend: Backend, feeds: Arc<Feeds>) -> Arc<Shared> {
        Arc::new(Shared {
            state: Mutex::new(State {
                backend,
                fresh: Unread::default(),
                #[cfg(target_os = "linux")]
                waiting: false,
                failed: false,
            }),
            feeds,
        })
    }

    /// Take the queued events into the freshness check's changes and every feed's; the lock stays held for the
    /// caller. An error: the watches failed, now or before.
    fn drain(&self) -> io::Result<MutexGuard<'_, State>> {
        let mut state = self.state.locked();
        if state.failed {
            return Err(io::Error::other("the change journal failed earlier"));
        }
        let mut seen = Vec::new();
        let result = match &mut state.backend {
            #[cfg(target_os = "linux")]
            Backend::Inotify(w) => w.drain(&mut |c| seen.push(c)),
            #[cfg(any(not(target_os = "linux"), test))]
            Backend::Portable(w) => {
                w.drain(&mut |c| seen.push(c));
                Ok(())
            }
        };
        for c in &seen {
            state.fresh.add(c);
        }
        self.feeds.record(&seen);
        if let Err(e) = result {
            tracing::warn!(error = %e, "the change journal failed; searches check every file, the watcher starts watches of its own");
            state.failed = true;
            self.feeds.end();
            return Err(e);
        }
        Ok(state)
    }
}

/// The feeds subscribed to a journal (their own lock: the portable backend's event thread wakes them without
/// taking the journal's).
#[derive(Default)]
struct Feeds(Mutex<Vec<Weak<Inbox>>>);

impl Feeds {
    fn record(&self, changes: &[Change]) {
        if changes.is_empty() {
            return;
        }
        for inbox in self.live() {
            let mut unread = inbox.unread.locked();
            changes.iter().for_each(|c| unread.add(c));
            drop(unread);
            inbox.wake.notify_one();
        }
    }

    #[cfg(any(not(target_os = "linux"), test))]
    fn wake(&self) {
        self.live().iter().for_each(|i| i.wake.notify_one());
    }

    fn end(&self) {
        for inbox in self.live() {
            inbox.ended.store(true, std::sync::atomic::Ordering::Relaxed);
            inbox.wake.notify_one();
        }
    }

    /// The feeds still subscribed (dropped ones are forgotten).
    fn live(&self) -> Vec<Arc<Inbox>> {
        let mut feeds = self.0.locked();
        feeds.retain(|f| f.strong_count() > 0);
        feeds.iter().filter_map(Weak::upgrade).collect()
    }
}

/// One feed's unread changes.
#[derive(Default)]
struct Inbox {
    unread: Mutex<Unread>,
    wake: tokio::sync::Notify,
    ended: std::sync::atomic::AtomicBool,
}

/// The changes a journal sees, for one reader (a watcher). Dropping it unsubscribes; the thread that waited for
/// events on its behalf stops within half a second.
pub struct ChangeFeed {
    shared: Arc<Shared>,
    inbox: Arc<Inbox>,
}

/// How long the thread that waits for a feed's events waits at a time before it looks whether the feed is
/// still subscribed.
#[cfg(target_os = "linux")]
const EVENT_WAIT: std::time::Duration = std::time::Duration::from_millis(500);

impl ChangeFeed {
    /// Watches of its own over what discovery walks under `roots`, and the transcripts folder: for a host whose
    /// engine has no journal to share (`MemoryBackend::watch_changes` is `None`). Inotify on Linux, the `notify`
    /// crate's watcher elsewhere.
    pub fn watch(roots: &MemoryRoots, sessions_dir: Option<&Path>) -> io::Result<ChangeFeed> {
        #[cfg(target_os = "linux")]
        let shared = Shared::start_inotify(roots, sessions_dir)?;
        #[cfg(not(target_os = "linux"))]
        let shared = Shared::start_portable(roots, sessions_dir)?;
        ChangeFeed::subscribe(shared)
    }

    fn subscribe(shared: Arc<Shared>) -> io::Result<ChangeFeed> {
        let inbox = Arc::new(Inbox::default());
        {
            let state = shared.state.locked();
            shared.feeds.0.locked().push(Arc::downgrade(&inbox));
            if state.failed {
                inbox.ended.store(true, std::sync::atomic::Ordering::Relaxed);
            }
            #[cfg(target_os = "linux")]
            wait_in_background(&shared, state)?;
        }
        Ok(ChangeFeed { shared, inbox })
    }
}

#[async_trait::async_trait]
impl memory_contract::changes::ChangeStream for ChangeFeed {
    /// The changes since the last call, once there are any. `None` when the journal failed (its watches could
    /// not be re-armed): the reader starts watches of its own if it still wants them.
    async fn next(&mut self) -> Option<ChangedFiles> {
        loop {
            // What the waiting thread has not picked up yet is taken here (and what it took is in the inbox).
            let failed = self.shared.drain().is_err();
            {
                let mut unread = self.inbox.unread.locked();
                if unread.events > 0 {
                    let u = std::mem::take(&mut *unread);
                    return Some(ChangedFiles { events: u.events, paths: u.paths, complete: !u.incomplete });
                }
            }
            if failed || self.inbox.ended.load(std::sync::atomic::Ordering::Relaxed) {
                return None;
            }
            self.inbox.wake.notified().await;
        }
    }
}

/// Start the thread that waits for the events of `shared` (its lock held: `state`), unless one runs.
#[cfg(target_os = "linux")]
fn wait_in_background(shared: &Arc<Shared>, mut state: MutexGuard<'_, State>) -> io::Result<()> {
    if state.backend.fd().is_some() && !state.waiting && !state.failed {
        let weak = Arc::downgrade(shared);
        std::thread::Builder::new().name("memory-journal".into()).spawn(move || wait_for_events(weak))?;
        state.waiting = true;
    }
    Ok(())
}

/// The thread behind the feeds of an inotify journal: waits for events and drains them, so that a feed's reader
/// wakes when a file changes. Ends when the journal is dropped, has no feed left or failed.
#[cfg(target_os = "linux")]
fn wait_for_events(journal: Weak<Shared>) {
    loop {
        let fd = {
            let Some(shared) = journal.upgrade() else { return };
            let mut state = shared.state.locked();
            match state.backend.fd() {
                Some(fd) if !state.failed && !shared.feeds.live().is_empty() => fd,
                _ => {
                    state.waiting = false;
                    return;
                }
            }
        };
        // Outside the lock: a search drains meanwhile. A re-arm may close this descriptor: the wait then ends
        // early or late, and the next round waits on the new one.
        let mut pfd = libc::pollfd { fd, events: libc::POLLIN, revents: 0 };
        // SAFETY: one valid pollfd, for the duration of the call.
        let ready = unsafe { libc::poll(&mut pfd, 1, EVENT_WAIT.as_millis() as libc::c_int) };
        if ready > 0 {
            let Some(shared) = journal.upgrade() else { return };
            // A failure is recorded in the journal and ends the feeds; the next round stops.
            drop(shared.drain());
        }
    }
}

fn is_real_dir(p: &Path) -> bool {
    std::fs::symlink_metadata(p).is_ok_and(|m| m.is_dir())
}
