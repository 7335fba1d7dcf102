//! `cursorkit._core.PendingAcks`: one consumer's pending acks (sent, unacked entries with their
//! batch sizes and hashes), a core value behind a mutex in a frozen pyclass.
//!
//! Single calls keep the GIL; bulk calls borrow numpy columns and check every value before the
//! core changes anything. Rows come back as `(n, 4)` int64 arrays that take over the Rust buffer.

use std::sync::Mutex;

use cursorkit_core::{CoreError, PendingAck, PendingAcks};
use numpy::PyArray1;
use pyo3::prelude::*;
use pyo3::types::PyTuple;

use super::draining::{rows_array, same_length, u32_values};
use crate::args::{column, int_arg, u32_arg};
use crate::errors::{IntoPy, TrackerClosed};
use crate::sync::{self, Shared};

/// `(ledger, entry, batch_size, hash)` rows, flat.
fn ack_rows(rows: &[PendingAck]) -> Vec<i64> {
    rows.iter()
        .flat_map(|&(l, e, b, h)| [l, e, i64::from(b), i64::from(h)])
        .collect()
}

/// One consumer's sent, unacked entries: (ledger, entry) → (batch size, hash), position order.
#[pyclass(name = "PendingAcks", module = "cursorkit._core", frozen)]
pub struct PyPendingAcks {
    inner: Mutex<PendingAcks>,
}

#[cold]
fn closed_error() -> PyErr {
    TrackerClosed::new_err("the pending acks are closed (drain_and_close was called)".to_owned())
}

crate::shared!(PyPendingAcks, PendingAcks, "PendingAcks");

#[pymethods]
impl PyPendingAcks {
    #[new]
    fn new() -> Self {
        Self {
            inner: Mutex::new(PendingAcks::new()),
        }
    }

    /// Records a sent entry; False when already pending. A closed map raises `TrackerClosed`.
    fn add(
        &self,
        ledger_id: &Bound<'_, PyAny>,
        entry_id: &Bound<'_, PyAny>,
        batch_size: &Bound<'_, PyAny>,
        hash: &Bound<'_, PyAny>,
    ) -> PyResult<bool> {
        let py = ledger_id.py();
        let l = int_arg(ledger_id, "ledger_id")?;
        let e = int_arg(entry_id, "entry_id")?;
        let b = u32_arg(batch_size, "batch_size")?;
        let h = u32_arg(hash, "hash")?;
        let mut p = self.lock(py);
        if p.is_closed() {
            return Err(closed_error());
        }
        p.add(l, e, b, h).py_err(py)
    }

    /// `add` for every row of four columns; a bool array of which were new. All or nothing.
    fn add_many<'py>(
        &self,
        ledger_ids: &Bound<'py, PyAny>,
        entry_ids: &Bound<'py, PyAny>,
        batch_sizes: &Bound<'py, PyAny>,
        hashes: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let py = ledger_ids.py();
        let ls = column(ledger_ids, "ledger_ids")?;
        let es = column(entry_ids, "entry_ids")?;
        let bs = column(batch_sizes, "batch_sizes")?;
        let hs = column(hashes, "hashes")?;
        let (ls, es, bs, hs) = (ls.as_slice(), es.as_slice(), bs.as_slice(), hs.as_slice());
        same_length(
            &["ledger_ids", "entry_ids", "batch_sizes", "hashes"],
            &[ls.len(), es.len(), bs.len(), hs.len()],
        )?;
        let out = sync::detached(py, &self.inner, |p| {
            if p.is_closed() {
                return Ok(None);
            }
            let bs = u32_values(bs, "batch_sizes")?;
            let hs = u32_values(hs, "hashes")?;
            p.add_many(ls, es, &bs, &hs).map(Some)
        })
        .py_err(py)?
        .ok_or_else(closed_error)?;
        Ok(PyArray1::from_vec(py, out).into_any())
    }

    /// Removes a pending entry (an ack); its `(batch_size, hash)`, or None if it was not pending.
    fn remove(
        &self,
        ledger_id: &Bound<'_, PyAny>,
        entry_id: &Bound<'_, PyAny>,
    ) -> PyResult<Option<(u32, u32)>> {
        let py = ledger_id.py();
        let l = int_arg(ledger_id, "ledger_id")?;
        let e = int_arg(entry_id, "entry_id")?;
        self.call(py, "remove", |c| c.remove(l, e))
    }

    /// `remove` for each position; `(found, batch_sizes, hashes)` arrays (0 where not found).
    fn remove_many<'py>(
        &self,
        ledger_ids: &Bound<'py, PyAny>,
        entry_ids: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyTuple>> {
        let py = ledger_ids.py();
        let ls = column(ledger_ids, "ledger_ids")?;
        let es = column(entry_ids, "entry_ids")?;
        let (ls, es) = (ls.as_slice(), es.as_slice());
        let (found, batches, hashes) = sync::detached(py, &self.inner, |p| {
            let removed = p.remove_many(ls, es)?;
            let found: Vec<bool> = removed.iter().map(Option::is_some).collect();
            let (b, h): (Vec<i64>, Vec<i64>) = removed
                .iter()
                .map(|r| r.map_or((0, 0), |(b, h)| (i64::from(b), i64::from(h))))
                .unzip();
            Ok::<_, CoreError>((found, b, h))
        })
        .py_err(py)?;
        PyTuple::new(
            py,
            [
                PyArray1::from_vec(py, found).into_any(),
                PyArray1::from_vec(py, batches).into_any(),
                PyArray1::from_vec(py, hashes).into_any(),
            ],
        )
    }

    /// Removes every pending entry at or before the position (a cumulative ack; entry may be
    /// -1); an `(n, 4)` int64 array of `(ledger, entry, batch_size, hash)` rows.
    fn remove_all_up_to<'py>(
        &self,
        ledger_id: &Bound<'py, PyAny>,
        entry_id: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let py = ledger_id.py();
        let l = int_arg(ledger_id, "ledger_id")?;
        let e = int_arg(entry_id, "entry_id")?;
        let flat = sync::detached(py, &self.inner, |p| {
            p.remove_all_up_to(l, e).map(|r| ack_rows(&r))
        })
        .py_err(py)?;
        rows_array(py, flat)
    }

    /// Removes and returns every row (as `remove_all_up_to`), and closes: later adds raise
    /// `TrackerClosed` (Pulsar's forEachAndClose, when the consumer leaves).
    fn drain_and_close<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let flat = sync::detached(py, &self.inner, |p| ack_rows(&p.drain_and_close()));
        rows_array(py, flat)
    }

    /// `(batch_size, hash)` of a pending entry, or None.
    fn get(
        &self,
        ledger_id: &Bound<'_, PyAny>,
        entry_id: &Bound<'_, PyAny>,
    ) -> PyResult<Option<(u32, u32)>> {
        let py = ledger_id.py();
        let l = int_arg(ledger_id, "ledger_id")?;
        let e = int_arg(entry_id, "entry_id")?;
        self.call(py, "get", |c| c.get(l, e))
    }

    /// Whether an entry is pending.
    fn contains(
        &self,
        ledger_id: &Bound<'_, PyAny>,
        entry_id: &Bound<'_, PyAny>,
    ) -> PyResult<bool> {
        let py = ledger_id.py();
        let l = int_arg(ledger_id, "ledger_id")?;
        let e = int_arg(entry_id, "entry_id")?;
        self.call(py, "contains", |c| c.contains(l, e))
    }

    /// Every pending row, unchanged, as an `(n, 4)` int64 array.
    fn items<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let flat = sync::detached(py, &self.inner, |p| ack_rows(&p.items()));
        rows_array(py, flat)
    }

    /// The hash of every pending entry in position order (int64 array).
    fn hashes<'py>(&self, py: Python<'py>) -> Bound<'py, PyAny> {
        let hs: Vec<i64> = sync::detached(py, &self.inner, |p| {
            p.hashes().into_iter().map(i64::from).collect()
        });
        PyArray1::from_vec(py, hs).into_any()
    }

    fn __len__(&self, py: Python<'_>) -> usize {
        self.lock(py).len()
    }

    /// Messages pending: the sum of the batch sizes.
    #[getter]
    fn total_messages(&self, py: Python<'_>) -> u64 {
        self.lock(py).total_messages()
    }

    /// Whether `drain_and_close()` was called.
    #[getter]
    fn closed(&self, py: Python<'_>) -> bool {
        self.lock(py).is_closed()
    }

    /// Exact heap bytes held (capacities, not lengths).
    fn memory_usage(&self, py: Python<'_>) -> usize {
        self.lock(py).memory_usage()
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        let p = self.lock(py);
        format!(
            "<PendingAcks entries={} messages={} closed={}>",
            p.len(),
            p.total_messages(),
            if p.is_closed() { "True" } else { "False" }
        )
    }
}
