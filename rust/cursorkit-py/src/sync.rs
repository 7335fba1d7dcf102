//! Locking for the frozen pyclasses: each holds its core value behind a `Mutex`.
//!
//! Per-call methods lock without releasing the GIL (uncontended, that is cheaper than a detach);
//! work proportional to a structure's size runs with the GIL released.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Mutex, MutexGuard, TryLockError};

use cursorkit_core::CoreError;

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

/// Elements (ranges, entries) below which a call keeps the GIL: see [`Shared::detached_if_large`].
pub const SMALL_WORK: u64 = 4096;

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

/// `py.detach(f)` for work on input (decoders, restores): a panic inside `f` becomes
/// `CoreError::Internal` naming `call` (raised as `cursorkit.errors.InternalError`), never a
/// `PanicException`, which a broker catching `Exception` would not catch.
pub fn guarded<R: Send>(
    py: Python<'_>,
    call: &str,
    f: impl FnOnce() -> Result<R, CoreError> + Send,
) -> Result<R, CoreError> {
    py.detach(|| catching(|| call.to_owned(), f))
}

/// Runs `f`; a panic inside it becomes `CoreError::Internal` naming the call (built only then).
#[inline]
pub fn catching<R>(
    call: impl FnOnce() -> String,
    f: impl FnOnce() -> Result<R, CoreError>,
) -> Result<R, CoreError> {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or_else(|p| Err(panicked(&call(), &*p)))
}

/// [`guarded`] on the locked value of `m`.
pub fn guarded_on<T: Send, R: Send>(
    py: Python<'_>,
    m: &Mutex<T>,
    call: &str,
    f: impl FnOnce(&mut T) -> Result<R, CoreError> + Send,
) -> Result<R, CoreError> {
    guarded(py, call, || {
        let mut value = m.lock().unwrap_or_else(|p| p.into_inner());
        f(&mut value)
    })
}

#[cold]
#[inline(never)]
fn panicked(call: &str, payload: &(dyn std::any::Any + Send)) -> CoreError {
    let what = payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic".to_owned());
    CoreError::Internal(format!(
        "{call}: internal error ({what}); the input was refused"
    ))
}

/// Panics inside [`guarded`] on purpose, so tests can see the guard turn it into `InternalError`.
#[pyfunction]
#[allow(clippy::panic)]
pub fn _guard_selftest(py: Python<'_>) -> PyResult<()> {
    use crate::errors::IntoPy;
    guarded(py, "_guard_selftest", || -> Result<(), CoreError> {
        std::panic::panic_any("deliberate panic".to_owned())
    })
    .py_err(py)
}

/// A frozen pyclass holding its core value behind a `Mutex` (field `inner`): locking, detaching
/// and guarded calls live here once, so each binding file holds only what is particular to its
/// type. Implemented by [`shared!`](crate::shared).
pub trait Shared {
    /// The core value behind the mutex.
    type Core: Send;
    /// The Python class name, for error messages.
    const NAME: &'static str;

    /// The mutex.
    fn cell(&self) -> &Mutex<Self::Core>;

    /// Locks the value; if another thread holds it, waits with the GIL released.
    fn lock(&self, py: Python<'_>) -> MutexGuard<'_, Self::Core> {
        lock(py, self.cell())
    }

    /// Runs `f` on the locked value with the GIL released (work proportional to its size).
    fn detached<R: Send>(&self, py: Python<'_>, f: impl FnOnce(&mut Self::Core) -> R + Send) -> R {
        detached(py, self.cell(), f)
    }

    /// [`Shared::detached`] when `size` of the value passes [`SMALL_WORK`], else `f` with the GIL
    /// held: releasing it costs more than a small call, and another thread may keep it for
    /// milliseconds once it is released.
    fn detached_if_large<R: Send>(
        &self,
        py: Python<'_>,
        size: impl FnOnce(&Self::Core) -> u64,
        f: impl FnOnce(&mut Self::Core) -> R + Send,
    ) -> R {
        let mut guard = self.lock(py);
        if size(&guard) <= SMALL_WORK {
            return f(&mut guard);
        }
        drop(guard);
        self.detached(py, f)
    }

    /// Runs `f` on the locked value (GIL held): core errors become `cursorkit.errors`, a panic
    /// `InternalError` naming `Class.method`.
    #[inline]
    fn call<R>(
        &self,
        py: Python<'_>,
        method: &str,
        f: impl FnOnce(&mut Self::Core) -> Result<R, CoreError>,
    ) -> PyResult<R> {
        self.run(py, method, f)
            .map_err(|e| crate::errors::to_py(py, e))
    }

    /// Bulk work on the locked value with the GIL released, guarded as [`Shared::call`] is.
    fn bulk<R: Send>(
        &self,
        py: Python<'_>,
        method: &str,
        f: impl FnOnce(&mut Self::Core) -> Result<R, CoreError> + Send,
    ) -> Result<R, CoreError> {
        let call = format!("{}.{method}", Self::NAME);
        guarded_on(py, self.cell(), &call, f)
    }

    /// [`Shared::call`] leaving the core error for the caller to map (a cursor names itself).
    #[inline]
    fn run<R>(
        &self,
        py: Python<'_>,
        method: &str,
        f: impl FnOnce(&mut Self::Core) -> Result<R, CoreError>,
    ) -> Result<R, CoreError> {
        let mut value = self.lock(py);
        catching(|| format!("{}.{method}", Self::NAME), || f(&mut value))
    }
}

/// Implements [`Shared`] for a pyclass with an `inner: Mutex<Core>` field.
#[macro_export]
macro_rules! shared {
    ($ty:ty, $core:ty, $name:literal) => {
        impl $crate::sync::Shared for $ty {
            type Core = $core;
            const NAME: &'static str = $name;
            fn cell(&self) -> &std::sync::Mutex<$core> {
                &self.inner
            }
        }
    };
}
