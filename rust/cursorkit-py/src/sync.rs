//! Locking for the frozen pyclasses: each holds its core value behind a `Mutex`.
//!
//! Per-call methods lock without releasing the GIL (uncontended, that is cheaper than a detach);
//! work proportional to a structure's size runs with the GIL released.

use std::sync::{Mutex, MutexGuard, TryLockError};

use pyo3::prelude::*;

/// Locks `m`; if another thread holds it, waits with the GIL released.
#[inline]
pub fn lock<'a, T: Send>(py: Python<'_>, m: &'a Mutex<T>) -> MutexGuard<'a, T> {
    loop {
        match m.try_lock() {
            Ok(guard) => return guard,
            Err(TryLockError::Poisoned(p)) => return p.into_inner(),
            Err(TryLockError::WouldBlock) => py.detach(|| drop(m.lock())),
        }
    }
}

/// Runs `f` on the locked value with the GIL released.
pub fn detached<T: Send, R: Send>(
    py: Python<'_>,
    m: &Mutex<T>,
    f: impl FnOnce(&mut T) -> R + Send,
) -> R {
    py.detach(|| {
        let mut guard = m.lock().unwrap_or_else(|p| p.into_inner());
        f(&mut guard)
    })
}
