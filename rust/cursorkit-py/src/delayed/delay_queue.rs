//! `cursorkit._core.DelayQueue`: the core delayed-index queue behind a mutex in a frozen pyclass,
//! and the time and count arguments the delayed classes share.

use std::sync::Mutex;

use cursorkit_core::{check_entry, DelayQueue, Popped};
use numpy::PyArray1;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyInt, PyTuple};

use crate::ackstate::rangeset::PyRangeSet;
use crate::args::{column, int_arg, limit_arg, Column};
use crate::errors::{IntoPy, InvalidArgument, InvalidInputType, InvalidPosition, LengthMismatch};
use crate::sync::{self, Shared};

/// Pops of at most this many indexes run with the GIL held (cheaper than releasing it).
pub(super) const SMALL_POP: usize = 1024;

/// A time or count argument: a non-integer is `InvalidInputType`, one beyond int64 `InvalidArgument`.
#[inline]
pub(super) fn time_arg(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<i64> {
    match obj.extract::<i64>() {
        Ok(v) if !obj.is_instance_of::<PyBool>() => Ok(v),
        _ => Err(time_arg_error(obj, what)),
    }
}

#[cold]
fn time_arg_error(obj: &Bound<'_, PyAny>, what: &str) -> PyErr {
    if obj.is_instance_of::<PyInt>() && !obj.is_instance_of::<PyBool>() {
        InvalidArgument::new_err(format!(
            "{what} {obj} does not fit in a signed 64-bit integer"
        ))
    } else {
        match int_arg(obj, what) {
            Err(e) => e,
            Ok(_) => InvalidInputType::new_err(format!("{what} must be an int")),
        }
    }
}

/// A column of delivery times: like an id column, but a value beyond int64 is `InvalidArgument`.
pub(super) fn time_column<'py>(obj: &Bound<'py, PyAny>, what: &str) -> PyResult<Column<'py>> {
    let py = obj.py();
    column(obj, what).map_err(|e| {
        if e.is_instance_of::<InvalidPosition>(py) {
            InvalidArgument::new_err(e.value(py).to_string())
        } else {
            e
        }
    })
}

/// A required count (`0..`); None and non-integers are `InvalidInputType`, negatives `InvalidArgument`.
pub(super) fn count_arg(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<usize> {
    if obj.is_none() {
        return Err(InvalidInputType::new_err(format!(
            "{what} must be an int, got None"
        )));
    }
    let n = limit_arg(Some(obj), what)?.unwrap_or(u64::MAX);
    Ok(usize::try_from(n).unwrap_or(usize::MAX))
}

/// Three columns of one length, or `LengthMismatch` naming the three lengths.
pub(super) fn same_length(names: [&str; 3], cols: [&[i64]; 3]) -> PyResult<()> {
    if cols[0].len() == cols[1].len() && cols[1].len() == cols[2].len() {
        return Ok(());
    }
    Err(LengthMismatch::new_err(format!(
        "{}, {} and {} differ in length: {}, {} and {} values",
        names[0],
        names[1],
        names[2],
        cols[0].len(),
        cols[1].len(),
        cols[2].len()
    )))
}

/// `(deliver_at, ledger_ids, entry_ids)` arrays taking over the popped columns without copying.
pub(super) fn popped_arrays(py: Python<'_>, p: Popped) -> PyResult<Bound<'_, PyTuple>> {
    PyTuple::new(
        py,
        [
            PyArray1::from_vec(py, p.at).into_any(),
            PyArray1::from_vec(py, p.ledgers).into_any(),
            PyArray1::from_vec(py, p.entries).into_any(),
        ],
    )
}

/// Delayed message indexes `(deliver_at, ledger, entry)`, unique by position, popped in order.
#[pyclass(name = "DelayQueue", module = "cursorkit._core", frozen)]
pub struct PyDelayQueue {
    inner: Mutex<DelayQueue>,
}

crate::shared!(PyDelayQueue, DelayQueue, "DelayQueue");

impl PyDelayQueue {
    /// Pops up to `max` indexes `<= limit`; small pops keep the GIL, large ones release it.
    fn pop(&self, py: Python<'_>, limit: (i64, i64, i64), max: usize) -> Popped {
        let pop = move |q: &mut DelayQueue| {
            let mut out = Popped::with_capacity(max.min(q.len() as usize));
            q.pop_until(limit, max, &mut out);
            out
        };
        if max <= SMALL_POP {
            pop(&mut self.lock(py))
        } else {
            sync::detached(py, &self.inner, pop)
        }
    }
}

#[pymethods]
impl PyDelayQueue {
    #[new]
    fn new() -> Self {
        Self {
            inner: Mutex::new(DelayQueue::new()),
        }
    }

    /// Queues one index; False when the position is already queued (the first time wins).
    fn add(
        &self,
        deliver_at: &Bound<'_, PyAny>,
        ledger_id: &Bound<'_, PyAny>,
        entry_id: &Bound<'_, PyAny>,
    ) -> PyResult<bool> {
        let py = deliver_at.py();
        let at = time_arg(deliver_at, "deliver_at")?;
        let l = int_arg(ledger_id, "ledger_id")?;
        let e = int_arg(entry_id, "entry_id")?;
        self.call(py, "add", |c| c.add(at, l, e))
    }

    /// Queues many indexes from numpy/Arrow columns or sequences; returns how many were new.
    fn add_many(
        &self,
        deliver_at: &Bound<'_, PyAny>,
        ledger_ids: &Bound<'_, PyAny>,
        entry_ids: &Bound<'_, PyAny>,
    ) -> PyResult<u64> {
        let py = deliver_at.py();
        let ats = time_column(deliver_at, "deliver_at")?;
        let ls = column(ledger_ids, "ledger_ids")?;
        let es = column(entry_ids, "entry_ids")?;
        let (ats, ls, es) = (ats.as_slice(), ls.as_slice(), es.as_slice());
        same_length(["deliver_at", "ledger_ids", "entry_ids"], [ats, ls, es])?;
        sync::detached(py, &self.inner, |q| q.add_many(ats, ls, es)).py_err(py)
    }

    /// Whether the position is queued.
    fn contains(
        &self,
        ledger_id: &Bound<'_, PyAny>,
        entry_id: &Bound<'_, PyAny>,
    ) -> PyResult<bool> {
        let py = ledger_id.py();
        let l = int_arg(ledger_id, "ledger_id")?;
        let e = int_arg(entry_id, "entry_id")?;
        check_entry(l, e).py_err(py)?;
        Ok(self.lock(py).contains(l, e))
    }

    fn __len__(&self, py: Python<'_>) -> usize {
        self.lock(py).len() as usize
    }

    /// The smallest queued `(deliver_at, ledger_id, entry_id)`, or None.
    fn peek(&self, py: Python<'_>) -> Option<(i64, i64, i64)> {
        self.lock(py).peek()
    }

    /// Pops, in order, up to `max_items` indexes at or before `(deliver_at, ledger_id, entry_id)`
    /// (compared as tuples); returns `(deliver_at, ledger_ids, entry_ids)` int64 arrays.
    fn pop_until<'py>(
        &self,
        deliver_at: &Bound<'py, PyAny>,
        ledger_id: &Bound<'py, PyAny>,
        entry_id: &Bound<'py, PyAny>,
        max_items: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyTuple>> {
        let py = deliver_at.py();
        let limit = (
            time_arg(deliver_at, "deliver_at")?,
            int_arg(ledger_id, "ledger_id")?,
            int_arg(entry_id, "entry_id")?,
        );
        let max = count_arg(max_items, "max_items")?;
        popped_arrays(py, self.pop(py, limit, max))
    }

    /// Pops, in order, up to `max_items` indexes with `deliver_at <= cutoff`.
    fn pop_due<'py>(
        &self,
        cutoff: &Bound<'py, PyAny>,
        max_items: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyTuple>> {
        let py = cutoff.py();
        let cutoff = time_arg(cutoff, "cutoff")?;
        let max = count_arg(max_items, "max_items")?;
        popped_arrays(py, self.pop(py, (cutoff, i64::MAX, i64::MAX), max))
    }

    /// Removes and returns every index in order, as three int64 arrays.
    fn drain<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        let all = sync::detached(py, &self.inner, |q| q.drain());
        popped_arrays(py, all)
    }

    /// Drops the indexes of ledgers below `ledger_id` (at or below mark-delete); returns how many.
    fn remove_ledgers_below(&self, ledger_id: &Bound<'_, PyAny>) -> PyResult<u64> {
        let py = ledger_id.py();
        let l = int_arg(ledger_id, "ledger_id")?;
        Ok(sync::detached(py, &self.inner, |q| {
            q.remove_ledgers_below(l)
        }))
    }

    /// Pops head indexes whose position `tracked` no longer holds; returns how many went.
    fn drop_untracked(&self, tracked: &Bound<'_, PyRangeSet>) -> u64 {
        let py = tracked.py();
        let set = tracked.get().lock(py);
        let mut q = self.lock(py);
        q.drop_stale_heads(|l, e| !matches!(set.contains(l, e), Ok(true)))
    }

    /// Drops everything and releases the memory.
    fn clear(&self, py: Python<'_>) {
        self.lock(py).clear();
    }

    /// Heap bytes held (vectors, maps, bitmaps; capacities, not lengths).
    fn memory_usage(&self, py: Python<'_>) -> usize {
        self.lock(py).memory_usage()
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        let q = self.lock(py);
        format!(
            "<DelayQueue len={} ledgers={} memory={} B>",
            q.len(),
            q.ledger_count(),
            q.memory_usage()
        )
    }
}
