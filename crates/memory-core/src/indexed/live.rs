//! The live index an engine answers from, and what is known about it: its handle, the storage's marker when it was
//! opened, whether it holds an index, the provider fingerprint it was built with and the unrelated-text probes, once
//! read. One owner, so that swapping in another handle (a rebuild, another process's reset) forgets, at once,
//! everything that was learnt about the old one.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use crate::locks::{LockExt, RwLockExt};
use crate::store::ChunkStore;

use super::store_handle;
use super::unrelated::{Remembered, Unrelated};

pub(super) struct LiveIndex {
    store: RwLock<Arc<dyn ChunkStore>>,
    /// The storage's [`live_marker`](crate::store::IndexStorage::live_marker) when `store` was opened.
    marker: Mutex<Option<String>>,
    /// Known to hold an index (saves reading the identity on every search).
    indexed: AtomicBool,
    /// Provider fingerprint of the live index, once read, with the handle it was read from: a swapped-in rebuild is
    /// another handle, so its fingerprint is read again.
    built_fingerprint: RwLock<Option<(usize, Option<String>)>>,
    /// The unrelated-text probes ([`super::unrelated`]), once read, with the handle and provider fingerprint they belong to.
    probes: RwLock<Option<Remembered>>,
}

impl LiveIndex {
    pub(super) fn new(store: Arc<dyn ChunkStore>, marker: Option<String>) -> LiveIndex {
        LiveIndex {
            store: RwLock::new(store),
            marker: Mutex::new(marker),
            indexed: AtomicBool::new(false),
            built_fingerprint: RwLock::new(None),
            probes: RwLock::new(None),
        }
    }

    /// The handle searches and syncs use now.
    pub(super) fn store(&self) -> Arc<dyn ChunkStore> {
        self.store.read_locked().clone()
    }

    /// Make `store` the live handle: what was learnt about the old one is forgotten (the probes are keyed by handle).
    pub(super) fn swap(&self, store: Arc<dyn ChunkStore>, marker: Option<String>) {
        *self.store.write_locked() = store;
        *self.marker.locked() = marker;
        self.forget_fingerprint();
        self.indexed.store(false, Ordering::Relaxed);
    }

    /// Whether the live handle was opened at storage marker `marker`.
    pub(super) fn opened_at(&self, marker: &Option<String>) -> bool {
        *self.marker.locked() == *marker
    }

    /// Whether the live index is known to hold an index.
    pub(super) fn known_indexed(&self) -> bool {
        self.indexed.load(Ordering::Relaxed)
    }

    /// The live index holds an index now.
    pub(super) fn mark_indexed(&self) {
        self.indexed.store(true, Ordering::Relaxed);
    }

    /// The fingerprint read for `store`, if it was read for this handle.
    pub(super) fn fingerprint_of(&self, store: &Arc<dyn ChunkStore>) -> Option<Option<String>> {
        let handle = store_handle(store);
        self.built_fingerprint.read_locked().as_ref().filter(|(h, _)| *h == handle).map(|(_, fp)| fp.clone())
    }

    /// Remember `fingerprint` as read for `store`.
    pub(super) fn remember_fingerprint(&self, store: &Arc<dyn ChunkStore>, fingerprint: Option<String>) {
        *self.built_fingerprint.write_locked() = Some((store_handle(store), fingerprint));
    }

    /// A sync may have changed the fingerprint: it is read again.
    pub(super) fn forget_fingerprint(&self) {
        *self.built_fingerprint.write_locked() = None;
    }

    /// The probes remembered for the store `handle` and this provider fingerprint, and whether the store holds them.
    pub(super) fn probes(&self, handle: usize, fingerprint: &str) -> Option<(Arc<Unrelated>, bool)> {
        match self.probes.read_locked().as_ref() {
            Some(r) if r.handle == handle && r.fingerprint == fingerprint => Some((r.probes.clone(), r.in_store)),
            _ => None,
        }
    }

    /// Remember the probes of the store `handle` under this provider fingerprint.
    pub(super) fn remember_probes(&self, remembered: Remembered) {
        *self.probes.write_locked() = Some(remembered);
    }
}
