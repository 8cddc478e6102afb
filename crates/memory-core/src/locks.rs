//! Lock poisoning, handled once for every in-process lock of the engines and the tools.
//!
//! A thread that panics while it holds a `std::sync` lock poisons it, and `lock().unwrap()` then panics in every
//! later holder: one failed request would turn a long-lived server into one that fails every request after it.
//! The state these locks guard stays usable as the panicking thread left it (caches, flags, queues of work,
//! handles that are replaced whole), so the next holder takes it as it is; the first recovery is logged.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};

static SAID: AtomicBool = AtomicBool::new(false);

fn recovered<G>(poisoned: PoisonError<G>) -> G {
    if !SAID.swap(true, Ordering::Relaxed) {
        tracing::error!("a thread panicked while holding a lock; carrying on with the state it left");
    }
    poisoned.into_inner()
}

/// [`Mutex::lock`] that takes a poisoned lock as it is.
pub trait LockExt<T: ?Sized> {
    /// The guard, whether or not an earlier holder panicked.
    fn locked(&self) -> MutexGuard<'_, T>;
}

impl<T: ?Sized> LockExt<T> for Mutex<T> {
    fn locked(&self) -> MutexGuard<'_, T> {
        self.lock().unwrap_or_else(recovered)
    }
}

/// [`Mutex::lock`] for state derived from elsewhere (a cache, a copy of the index's vectors): a holder that panicked
/// may have left it half updated, so a poisoned lock hands it over reset to its default, to be derived again.
pub trait ResetOnPoison<T: Default> {
    /// The guard; the state reset to `T::default()` when an earlier holder panicked.
    fn locked_or_reset(&self) -> MutexGuard<'_, T>;
}

impl<T: Default> ResetOnPoison<T> for Mutex<T> {
    fn locked_or_reset(&self) -> MutexGuard<'_, T> {
        let poisoned = self.is_poisoned();
        let mut guard = self.lock().unwrap_or_else(recovered);
        if poisoned {
            *guard = T::default();
            self.clear_poison();
        }
        guard
    }
}

/// [`RwLock::read`] and [`RwLock::write`] that take a poisoned lock as it is.
pub trait RwLockExt<T: ?Sized> {
    /// A read guard, whether or not an earlier writer panicked.
    fn read_locked(&self) -> RwLockReadGuard<'_, T>;
    /// The write guard, whether or not an earlier writer panicked.
    fn write_locked(&self) -> RwLockWriteGuard<'_, T>;
}

impl<T: ?Sized> RwLockExt<T> for RwLock<T> {
    fn read_locked(&self) -> RwLockReadGuard<'_, T> {
        self.read().unwrap_or_else(recovered)
    }

    fn write_locked(&self) -> RwLockWriteGuard<'_, T> {
        self.write().unwrap_or_else(recovered)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lock_poisoned_by_a_panicking_holder_is_taken_as_it_was_left() {
        let m = std::sync::Arc::new(Mutex::new(vec![1]));
        let r = std::sync::Arc::new(RwLock::new(5));
        let (m2, r2) = (m.clone(), r.clone());
        let _ = std::thread::spawn(move || {
            let _g = r2.write().unwrap();
            m2.lock().unwrap().push(2);
            let _held = m2.lock();
            panic!("a request failed");
        })
        .join();
        assert!(m.is_poisoned() && r.is_poisoned());
        assert_eq!(*m.locked(), vec![1, 2]);
        m.locked().push(3);
        assert_eq!(*m.locked(), vec![1, 2, 3]);
        assert_eq!(*r.read_locked(), 5);
        *r.write_locked() = 6;
        assert_eq!(*r.read_locked(), 6);
    }

    #[test]
    fn derived_state_behind_a_poisoned_lock_is_reset_to_be_derived_again() {
        let m = std::sync::Arc::new(Mutex::new(Some(vec![1, 2])));
        let m2 = m.clone();
        let _ = std::thread::spawn(move || {
            let mut half_updated = m2.lock().unwrap();
            half_updated.as_mut().unwrap().push(3);
            panic!("a refresh failed half way");
        })
        .join();
        assert!(m.is_poisoned());
        assert_eq!(*m.locked_or_reset(), None);
        assert!(!m.is_poisoned());
        *m.locked_or_reset() = Some(vec![4]);
        assert_eq!(*m.locked_or_reset(), Some(vec![4]), "a sound lock keeps its state");
    }
}
