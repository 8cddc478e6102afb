//! The journal's backend where inotify does not exist (macOS, Windows, the BSDs): the `notify` crate's watcher.
//! Its events arrive on a thread of its own, after the change returned, so the freshness check never trusts it
//! (such a journal only feeds a watcher); on Linux it is built for its tests only.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, TrySendError};
use std::sync::Arc;

use notify::{RecursiveMode, Watcher as _};
use tracing::{debug, warn};

use super::{is_real_dir, Change, Feeds};
use crate::discovery::{MemoryRoots, MEMORY_DIR};

/// Events waiting to be drained; past this many they are lost, and the next drain says so.
const QUEUE: usize = 4096;

pub(super) struct Watches {
    roots: MemoryRoots,
    sessions_dir: Option<PathBuf>,
    watcher: notify::RecommendedWatcher,
    events: Receiver<notify::Result<notify::Event>>,
    /// The queue was full: events were dropped.
    lost: Arc<AtomicBool>,
    memory_watched: bool,
    /// Extra paths (and the transcripts folder) that did not exist when last tried: watched once they appear.
    unwatched: Vec<PathBuf>,
}

impl Watches {
    /// Watch the workspace (its root files, `memory/`), `memory/` and every extra path recursively, and the
    /// transcripts folder. Each event wakes the feeds; their readers drain it (the watcher cannot be asked to add
    /// a watch from its own event thread, so a drain does that).
    pub(super) fn start(roots: &MemoryRoots, sessions_dir: Option<&Path>, feeds: Arc<Feeds>) -> io::Result<Watches> {
        let (tx, events) = mpsc::sync_channel(QUEUE);
        let lost = Arc::new(AtomicBool::new(false));
        let lost_in = lost.clone();
        let watcher = notify::recommended_watcher(move |ev| {
            if let Err(TrySendError::Full(_)) = tx.try_send(ev) {
                lost_in.store(true, Ordering::Relaxed);
            }
            feeds.wake();
        })
        .map_err(io::Error::other)?;
        let mut w = Watches {
            roots: roots.clone(),
            sessions_dir: sessions_dir.map(Path::to_path_buf),
            watcher,
            events,
            lost,
            memory_watched: false,
            unwatched: roots.extra_paths.iter().map(PathBuf::as_path).chain(sessions_dir).map(Path::to_path_buf).collect(),
        };
        let ws = w.roots.workspace.clone();
        w.watcher.watch(&ws, RecursiveMode::NonRecursive).map_err(|e| io::Error::other(format!("cannot watch {}: {e}", ws.display())))?;
        w.watch_new_folders();
        Ok(w)
    }

    /// `memory/` and the extra paths and transcripts folder that exist now. For a target that does not exist yet,
    /// its parent is watched so that its creation is seen.
    fn watch_new_folders(&mut self) {
        let memory = self.roots.workspace.join(MEMORY_DIR);
        if !self.memory_watched && is_real_dir(&memory) {
            match self.watcher.watch(&memory, RecursiveMode::Recursive) {
                Ok(()) => self.memory_watched = true,
                Err(e) => warn!(path = %memory.display(), error = %e, "cannot watch the memory folder"),
            }
        }
        for x in std::mem::take(&mut self.unwatched) {
            let result = match std::fs::symlink_metadata(&x) {
                Ok(m) if m.is_dir() => self.watcher.watch(&x, RecursiveMode::Recursive),
                Ok(_) => match x.parent() {
                    Some(parent) => self.watcher.watch(parent, RecursiveMode::NonRecursive),
                    None => continue,
                },
                Err(_) => {
                    if let Some(parent) = x.parent().filter(|p| p.is_dir()) {
                        let _ = self.watcher.watch(parent, RecursiveMode::NonRecursive);
                    }
                    debug!(path = %x.display(), "not there yet; watched once it appears");
                    self.unwatched.push(x);
                    continue;
                }
            };
            if let Err(e) = result {
                warn!(path = %x.display(), error = %e, "cannot watch path");
            }
        }
    }

    /// `record` what the queued events mean to the memory files: each relevant path, and a change no file name
    /// covers for an event that asks for a rescan, a watcher error or lost events.
    pub(super) fn drain(&mut self, record: &mut dyn FnMut(Change)) {
        let mut relevant = false;
        if self.lost.swap(false, Ordering::Relaxed) {
            record(None);
            relevant = true;
        }
        while let Ok(ev) = self.events.try_recv() {
            match ev {
                Ok(ev) if ev.need_rescan() => {
                    record(None);
                    relevant = true;
                }
                // Opening or reading a file changes nothing (and a sync's own reads would start the next sync).
                Ok(ev) if matches!(ev.kind, notify::EventKind::Access(_)) => {}
                Ok(ev) => {
                    for p in ev.paths.into_iter().filter(|p| self.roots.is_relevant_change(p, self.sessions_dir.as_deref())) {
                        record(Some(p));
                        relevant = true;
                    }
                }
                Err(e) => {
                    warn!(error = %e, "file watcher error; treating it as a change");
                    record(None);
                    relevant = true;
                }
            }
        }
        if relevant && (!self.memory_watched || !self.unwatched.is_empty()) {
            self.watch_new_folders();
        }
    }
}
