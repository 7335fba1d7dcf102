//! `cursorkit._core.RedeliveryCounts`: durable redelivery counts as run-length ranges, behind a
//! mutex; bulk calls take numpy columns, and pruning and the byte forms release the GIL when large.

use std::sync::Mutex;

use cursorkit_core::{Position, RedeliveryCounts};
use numpy::PyArray1;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PyTuple};

use crate::ackstate::cursor::cursor_arg;
use crate::ackstate::position::PyPosition;
use crate::ackstate::rangeset::columns;
use crate::args::{bytes_arg, column, int_arg};
use crate::errors::{to_py, InvalidArgument};
use crate::sync::{self, Shared};

/// How many times each position went back for redelivery, as run-length ranges, persisted by
/// deltas of what changed (beyond Pulsar, whose counts are memory only).
#[pyclass(name = "RedeliveryCounts", module = "cursorkit._core", frozen)]
pub struct PyRedeliveryCounts {
    inner: Mutex<RedeliveryCounts>,
}

crate::shared!(PyRedeliveryCounts, RedeliveryCounts, "RedeliveryCounts");

fn max_runs_arg(max_runs: Option<&Bound<'_, PyAny>>) -> PyResult<usize> {
    let Some(v) = max_runs else { return Ok(0) };
    let n = int_arg(v, "max_runs")?;
    usize::try_from(n)
        .ok()
        .filter(|&n| n > 0)
        .ok_or_else(|| InvalidArgument::new_err(format!("max_runs must be positive, got {n}")))
}

fn count_arg(obj: &Bound<'_, PyAny>) -> PyResult<u32> {
    let n = int_arg(obj, "count")?;
    u32::try_from(n).map_err(|_| InvalidArgument::new_err(format!("count {n} is not in 0..2^32")))
}

#[pymethods]
impl PyRedeliveryCounts {
    /// Empty counts holding at most ``max_runs`` runs (default 4,194,304).
    #[new]
    #[pyo3(signature = (max_runs = None))]
    fn __new__(max_runs: Option<&Bound<'_, PyAny>>) -> PyResult<Self> {
        Ok(Self {
            inner: Mutex::new(RedeliveryCounts::new(max_runs_arg(max_runs)?)),
        })
    }

    /// Counts decoded from a snapshot (``encode``) or a delta (``take_delta``).
    #[staticmethod]
    #[pyo3(signature = (data, max_runs = None))]
    fn decode(data: &Bound<'_, PyAny>, max_runs: Option<&Bound<'_, PyAny>>) -> PyResult<Self> {
        let py = data.py();
        let bytes = bytes_arg(data, "data")?;
        let max = max_runs_arg(max_runs)?;
        let got = py.detach(|| RedeliveryCounts::decode(&bytes, max));
        Ok(Self {
            inner: Mutex::new(got.map_err(|e| to_py(py, e))?),
        })
    }

    /// The budget of runs.
    #[getter]
    fn max_runs(&self, py: Python<'_>) -> usize {
        self.lock(py).max_runs()
    }

    /// Positions with a count.
    fn __len__(&self, py: Python<'_>) -> usize {
        self.lock(py).positions() as usize
    }

    /// Runs held (neighbouring positions with one count share one).
    #[getter]
    fn run_count(&self, py: Python<'_>) -> usize {
        self.lock(py).run_count()
    }

    /// Bytes held, approximately.
    fn memory_usage(&self, py: Python<'_>) -> u64 {
        self.lock(py).memory_usage()
    }

    /// A position's count (0 when it has none).
    fn get(&self, position: PyRef<'_, PyPosition>) -> PyResult<u32> {
        let py = position.py();
        let p = position.0;
        self.lock(py)
            .get(p.ledger_id, p.entry_id)
            .map_err(|e| to_py(py, e))
    }

    /// Counts of many positions, as a uint32 array.
    fn get_many<'py>(
        &self,
        ledger_ids: &Bound<'py, PyAny>,
        entry_ids: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyArray1<u32>>> {
        let py = ledger_ids.py();
        let (ls, es) = columns(ledger_ids, entry_ids)?;
        let (ls, es) = (ls.as_slice(), es.as_slice());
        let got = self.detached_if_large(py, |_| ls.len() as u64, |c| c.get_many(ls, es));
        Ok(PyArray1::from_vec(py, got.map_err(|e| to_py(py, e))?))
    }

    /// Sets a position's count (0 forgets it).
    fn set(&self, position: PyRef<'_, PyPosition>, count: &Bound<'_, PyAny>) -> PyResult<()> {
        let py = position.py();
        let (p, n) = (position.0, count_arg(count)?);
        self.lock(py)
            .set(p.ledger_id, p.entry_id, n)
            .map_err(|e| to_py(py, e))
    }

    /// Raises a position's count by one and returns it.
    fn increment(&self, position: PyRef<'_, PyPosition>) -> PyResult<u32> {
        let py = position.py();
        let p = position.0;
        self.lock(py)
            .increment(p.ledger_id, p.entry_id)
            .map_err(|e| to_py(py, e))
    }

    /// Sets the counts of many positions (checked first: a bad row changes nothing).
    fn set_many(
        &self,
        ledger_ids: &Bound<'_, PyAny>,
        entry_ids: &Bound<'_, PyAny>,
        counts: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let py = ledger_ids.py();
        let (ls, es) = columns(ledger_ids, entry_ids)?;
        let (ls, es) = (ls.as_slice(), es.as_slice());
        let ns = column(counts, "counts")?;
        let ns: Vec<u32> = ns
            .as_slice()
            .iter()
            .map(|&n| {
                u32::try_from(n)
                    .map_err(|_| InvalidArgument::new_err(format!("count {n} is not in 0..2^32")))
            })
            .collect::<PyResult<_>>()?;
        self.detached_if_large(py, |_| ns.len() as u64, |c| c.set_many(ls, es, &ns))
            .map_err(|e| to_py(py, e))
    }

    /// Forgets every count at or below ``position`` (mark-delete moved).
    fn forget_through(&self, position: PyRef<'_, PyPosition>) {
        let py = position.py();
        let p = position.0;
        self.detached_if_large(py, |c| c.run_count() as u64, |c| c.forget_through(p));
    }

    /// Forgets the counts of everything the cursor acknowledged; returns how many went.
    fn prune(&self, cursor: &Bound<'_, PyAny>) -> PyResult<u64> {
        let py = cursor.py();
        let c = cursor_arg(cursor)?.get();
        let (mine, theirs) = (self.cell(), c.cell());
        sync::guarded(py, "RedeliveryCounts.prune", || {
            let mut counts = mine.lock().unwrap_or_else(|p| p.into_inner());
            let k = theirs.lock().unwrap_or_else(|p| p.into_inner());
            counts.prune(&k)
        })
        .map_err(|e| to_py(py, e))
    }

    /// Forgets every count (the next delta forgets them too).
    fn clear(&self, py: Python<'_>) {
        self.lock(py).clear();
    }

    /// Whether anything changed since the last ``take_delta``.
    #[getter]
    fn has_changes(&self, py: Python<'_>) -> bool {
        self.lock(py).has_changes()
    }

    /// The changed positions with their counts (0: forgotten), encoded; clears the changes.
    fn take_delta<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        let data = self.lock(py).take_delta();
        PyBytes::new(py, &data)
    }

    /// Every run, encoded (a snapshot); ``first_runs``: only that many, from the lowest position.
    #[pyo3(signature = (first_runs = None))]
    fn encode<'py>(&self, py: Python<'py>, first_runs: Option<usize>) -> Bound<'py, PyBytes> {
        let data = self.detached_if_large(
            py,
            |c| c.run_count() as u64,
            |c| match first_runs {
                Some(n) => c.encode_first(n),
                None => c.encode(),
            },
        );
        PyBytes::new(py, &data)
    }

    /// Applies a delta or snapshot over these counts, as changes (damaged bytes change nothing).
    fn apply(&self, data: &Bound<'_, PyAny>) -> PyResult<()> {
        let py = data.py();
        let bytes = bytes_arg(data, "data")?;
        self.detached_if_large(py, |_| bytes.len() as u64, |c| c.apply(&bytes))
            .map_err(|e| to_py(py, e))
    }

    /// Runs with a count of at least ``min_count`` as ``(first, last, count)``, in position
    /// order: the messages a dead-letter policy of ``min_count`` redeliveries would move.
    #[pyo3(signature = (min_count = 1))]
    fn runs<'py>(&self, py: Python<'py>, min_count: u32) -> PyResult<Bound<'py, PyList>> {
        let runs: Vec<(i64, i64, i64, u32)> =
            self.lock(py).runs().filter(|r| r.3 >= min_count).collect();
        let out = PyList::empty(py);
        for (l, a, b, n) in runs {
            let first = PyPosition::wrap(
                py,
                Position {
                    ledger_id: l,
                    entry_id: a,
                },
            )?;
            let last = PyPosition::wrap(
                py,
                Position {
                    ledger_id: l,
                    entry_id: b,
                },
            )?;
            out.append(PyTuple::new(
                py,
                [
                    first.into_any(),
                    last.into_any(),
                    n.into_pyobject(py)?.into_any(),
                ],
            )?)?;
        }
        Ok(out)
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        let c = self.lock(py);
        format!(
            "RedeliveryCounts(positions={}, runs={}, max_runs={})",
            c.positions(),
            c.run_count(),
            c.max_runs()
        )
    }
}
